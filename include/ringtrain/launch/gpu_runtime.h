// The few CUDA runtime facts the launch layer needs, behind a backend-neutral
// interface. A CPU-only build answers "no devices".
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace ringtrain {

bool cuda_compiled();

// What cudaGetDeviceCount said, honouring CUDA_VISIBLE_DEVICES. Never throws and
// creates no context.
//   count: the devices this process can use (0 on error);
//   error: "" when the runtime answered: cudaSuccess, or cudaErrorNoDevice,
//          which is a plain "no device" (also what an empty CUDA_VISIBLE_DEVICES
//          gives). Otherwise the CUDA error's name and text, e.g.
//          "cudaErrorInsufficientDriver: CUDA driver version is insufficient ...".
// Whether an error means "no GPU here" or "a broken GPU" is decided by
// assess_cuda_probe (device_choice.h), which also looks for device nodes.
// A CPU-only build answers {0, ""}.
struct CudaProbe {
  int count = 0;
  std::string error;
};
CudaProbe cuda_probe();

// One physical id per visible device, in CUDA ordinal order: "GPU-" and the
// device's UUID formatted as nvidia-smi prints it (on a MIG instance, the
// instance's own UUID), or "PCI-dddd:bb:dd.f" where the UUID reads as zeros.
// From cudaGetDeviceProperties, which creates no context. Throws on a CUDA
// error; empty in a CPU-only build.
std::vector<std::string> cuda_visible_device_uuids();

std::string cuda_device_name(int ordinal);
// Makes `ordinal` current for this thread; the first CUDA call after it creates
// the context on the right device.
void cuda_set_device(int ordinal);

struct GpuLibraryVersions {
  std::string cuda_runtime = "not compiled";
  std::string cuda_driver = "not compiled";
  std::string cudnn = "not compiled";
  std::string nccl = "not compiled";
  std::string cublas = "not compiled";
};
GpuLibraryVersions gpu_library_versions();

// Runs y = a*x + y on the device through kernels/axpy.cu and copies the result
// back; the GPU smoke test compares it with the host twin.
void cuda_smoke_axpy(float a, const float* x, float* y, std::size_t n);

}  // namespace ringtrain
