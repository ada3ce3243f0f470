// The CUDA build's GPU runtime probes (host code, compiled by the host
// compiler): device count, visible GPU UUIDs, names, library versions. These
// create no CUDA context, so device choice runs them before any device is
// chosen. cuda_set_device and the smoke test do create one, on the chosen GPU.
#include <cublas_v2.h>
#include <cudnn.h>
#include <nccl.h>

#include <fmt/format.h>

#include <string>
#include <vector>

#include "core/cuda/check_cuda.h"
#include "kernels/axpy.h"
#include "ringtrain/launch/gpu_runtime.h"

namespace ringtrain {

bool cuda_compiled() {
  return true;
}

CudaProbe cuda_probe() {
  CudaProbe probe;
  cudaError_t e = cudaGetDeviceCount(&probe.count);
  (void)cudaGetLastError();  // leave no sticky error for a later check
  if (e == cudaSuccess) return probe;
  probe.count = 0;
  // No device (or all hidden by CUDA_VISIBLE_DEVICES) is an answer, not an
  // error. Everything else (no driver, a driver older than the runtime, a
  // failed init) is reported; assess_cuda_probe decides what it means.
  if (e != cudaErrorNoDevice)
    probe.error = fmt::format("{}: {}", cudaGetErrorName(e), cudaGetErrorString(e));
  return probe;
}

std::vector<std::string> cuda_visible_device_uuids() {
  int n = 0;
  RT_CUDA_CHECK(cudaGetDeviceCount(&n));
  std::vector<std::string> ids;
  for (int i = 0; i < n; ++i) {
    // Properties come from the driver without a context, so no rank touches a
    // GPU that it will not use.
    cudaDeviceProp prop{};
    RT_CUDA_CHECK(cudaGetDeviceProperties(&prop, i));
    const auto* b = reinterpret_cast<const unsigned char*>(prop.uuid.bytes);
    bool zero = true;
    for (std::size_t k = 0; k < sizeof(prop.uuid.bytes); ++k) zero = zero && b[k] == 0;
    if (zero) {
      ids.push_back(fmt::format("PCI-{:04x}:{:02x}:{:02x}.0", prop.pciDomainID, prop.pciBusID,
                                prop.pciDeviceID));
      continue;
    }
    std::string id = "GPU-";
    for (std::size_t k = 0; k < 16; ++k) {
      if (k == 4 || k == 6 || k == 8 || k == 10) id += '-';
      id += fmt::format("{:02x}", b[k]);
    }
    ids.push_back(std::move(id));
  }
  return ids;
}

std::string cuda_device_name(int ordinal) {
  cudaDeviceProp prop{};
  RT_CUDA_CHECK(cudaGetDeviceProperties(&prop, ordinal));
  return prop.name;
}

void cuda_set_device(int ordinal) {
  RT_CUDA_CHECK(cudaSetDevice(ordinal));
}

namespace {
std::string version3(int v, int major_div, int minor_div, int minor_mod) {
  return fmt::format("{}.{}.{}", v / major_div, (v / minor_div) % minor_mod, v % minor_div);
}
}  // namespace

GpuLibraryVersions gpu_library_versions() {
  GpuLibraryVersions v;
  v.cuda_runtime =
      fmt::format("{}.{} (compiled)", CUDART_VERSION / 1000, (CUDART_VERSION % 1000) / 10);
  int driver = 0;
  if (cudaDriverGetVersion(&driver) == cudaSuccess && driver > 0)
    v.cuda_driver = fmt::format("{}.{}", driver / 1000, (driver % 1000) / 10);
  else
    v.cuda_driver = "no driver";
  (void)cudaGetLastError();
  v.cudnn = fmt::format("{}.{}.{} (compiled), {} (loaded)", CUDNN_MAJOR, CUDNN_MINOR,
                        CUDNN_PATCHLEVEL, cudnnGetVersion());
  int nccl = 0;
  ncclGetVersion(&nccl);
  v.nccl = fmt::format("{}.{}.{} (compiled), {} (loaded)", NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH,
                       version3(nccl, 10000, 100, 100));
  v.cublas =
      fmt::format("{}.{}.{} (compiled)", CUBLAS_VER_MAJOR, CUBLAS_VER_MINOR, CUBLAS_VER_PATCH);
  return v;
}

void cuda_smoke_axpy(float a, const float* x, float* y, std::size_t n) {
  float* dx = nullptr;
  float* dy = nullptr;
  RT_CUDA_CHECK(cudaMalloc(&dx, n * sizeof(float) + 1));
  RT_CUDA_CHECK(cudaMalloc(&dy, n * sizeof(float) + 1));
  RT_CUDA_CHECK(cudaMemcpy(dx, x, n * sizeof(float), cudaMemcpyHostToDevice));
  RT_CUDA_CHECK(cudaMemcpy(dy, y, n * sizeof(float), cudaMemcpyHostToDevice));
  kernels::axpy_f32_cuda(a, dx, dy, n, nullptr);
  RT_CUDA_CHECK(cudaMemcpy(y, dy, n * sizeof(float), cudaMemcpyDeviceToHost));
  RT_CUDA_CHECK(cudaFree(dx));
  RT_CUDA_CHECK(cudaFree(dy));
}

}  // namespace ringtrain
