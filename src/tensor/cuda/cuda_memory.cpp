// CUDA memory for tensors. Allocation makes the owning device current first, so
// a tensor lands on its device whatever the calling thread had selected.
#include <fmt/format.h>

#include "core/cuda/check_cuda.h"
#include "tensor/cuda_memory.h"

namespace ringtrain::detail {

void* cuda_allocate(std::size_t bytes, int ordinal) {
  RT_CUDA_CHECK(cudaSetDevice(ordinal));
  void* p = nullptr;
  const cudaError_t e = cudaMalloc(&p, bytes);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    throw_library_error("CUDA", __FILE__, __LINE__,
                        fmt::format("cudaMalloc of {} bytes on cuda:{}: {}", bytes, ordinal,
                                    cudaGetErrorString(e)));
  }
  return p;
}

void cuda_free(void* ptr, int) noexcept {
  (void)cudaFree(ptr);
}

void cuda_zero(void* ptr, std::size_t bytes, int ordinal) {
  RT_CUDA_CHECK(cudaSetDevice(ordinal));
  RT_CUDA_CHECK(cudaMemset(ptr, 0, bytes));
}

void cuda_synchronize(int ordinal) {
  RT_CUDA_CHECK(cudaSetDevice(ordinal));
  RT_CUDA_CHECK(cudaDeviceSynchronize());
}

}  // namespace ringtrain::detail
