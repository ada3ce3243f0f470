// The few CUDA runtime facts the launch layer needs, behind a backend-neutral
// interface. A CPU-only build answers "no devices".
#pragma once

#include <string>

namespace ringtrain {

bool cuda_compiled();
// Devices the CUDA runtime can see (honouring CUDA_VISIBLE_DEVICES). 0 when
// CUDA is not compiled in, there is no driver, or no device. Creates no context.
int cuda_runtime_device_count();
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
