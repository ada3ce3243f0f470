// The CUDA build's GPU runtime facts (host code, compiled by the host compiler).
// runtime but creates no context, so it is safe before the device is chosen.
#include <cublas_v2.h>
#include <cudnn.h>
#include <nccl.h>

#include <fmt/format.h>

#include "core/cuda/check_cuda.h"
#include "kernels/axpy.h"
#include "ringtrain/launch/gpu_runtime.h"

namespace ringtrain {

bool cuda_compiled() { return true; }

int cuda_runtime_device_count() {
  int n = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    // No driver or no device is a CPU machine, not an error.
    (void)cudaGetLastError();
    return 0;
  }
  return n;
}

std::string cuda_device_name(int ordinal) {
  cudaDeviceProp prop{};
  RT_CUDA_CHECK(cudaGetDeviceProperties(&prop, ordinal));
  return prop.name;
}

void cuda_set_device(int ordinal) { RT_CUDA_CHECK(cudaSetDevice(ordinal)); }

namespace {
std::string version3(int v, int major_div, int minor_div, int minor_mod) {
  return fmt::format("{}.{}.{}", v / major_div, (v / minor_div) % minor_mod, v % minor_div);
}
}  // namespace

GpuLibraryVersions gpu_library_versions() {
  GpuLibraryVersions v;
  v.cuda_runtime = fmt::format("{}.{} (compiled)", CUDART_VERSION / 1000, (CUDART_VERSION % 1000) / 10);
  int driver = 0;
  if (cudaDriverGetVersion(&driver) == cudaSuccess && driver > 0)
    v.cuda_driver = fmt::format("{}.{}", driver / 1000, (driver % 1000) / 10);
  else
    v.cuda_driver = "no driver";
  (void)cudaGetLastError();
  v.cudnn = fmt::format("{}.{}.{} (compiled), {} (loaded)", CUDNN_MAJOR, CUDNN_MINOR, CUDNN_PATCHLEVEL,
                        cudnnGetVersion());
  int nccl = 0;
  ncclGetVersion(&nccl);
  v.nccl = fmt::format("{}.{}.{} (compiled), {} (loaded)", NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH,
                       version3(nccl, 10000, 100, 100));
  v.cublas = fmt::format("{}.{}.{} (compiled)", CUBLAS_VER_MAJOR, CUBLAS_VER_MINOR, CUBLAS_VER_PATCH);
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
