// The CPU-only build's answer to the GPU runtime interface: there is no device.
#include "ringtrain/core/check.h"
#include "ringtrain/launch/gpu_runtime.h"

namespace ringtrain {

bool cuda_compiled() {
  return false;
}
CudaProbe cuda_probe() {
  return {};
}
std::vector<std::string> cuda_visible_device_uuids() {
  return {};
}
std::string cuda_device_name(int) {
  return "none";
}
void cuda_set_device(int ordinal) {
  RT_CHECK(false, "cannot use CUDA device {}: this ringtrain was built without CUDA", ordinal);
}
GpuLibraryVersions gpu_library_versions() {
  return {};
}
void cuda_smoke_axpy(float, const float*, float*, std::size_t) {
  RT_CHECK(false, "this ringtrain was built without CUDA");
}

}  // namespace ringtrain
