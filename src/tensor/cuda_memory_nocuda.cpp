// CPU-only build: a tensor on a GPU cannot exist, so every request says why.
#include "ringtrain/core/check.h"
#include "tensor/cuda_memory.h"

namespace ringtrain::detail {

namespace {
[[noreturn]] void no_cuda(const char* what) {
  RT_CHECK(false, "{} on a CUDA device: this ringtrain was built without CUDA", what);
  __builtin_unreachable();
}
}  // namespace

void* cuda_allocate(std::size_t, int) {
  no_cuda("cannot allocate memory");
}
void* cuda_allocate_here(std::size_t) {
  no_cuda("cannot allocate memory");
}
void cuda_free(void*, int) noexcept {}
void cuda_zero(void*, std::size_t, int) {
  no_cuda("cannot zero memory");
}
void cuda_synchronize(int) {
  no_cuda("cannot synchronize");
}

}  // namespace ringtrain::detail
