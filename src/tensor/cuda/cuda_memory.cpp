// CUDA memory for tensors. Allocation makes the owning device current first, so
// a tensor lands on its device whatever the calling thread had selected.
#include <mutex>
#include <unordered_map>

#include <fmt/format.h>

#include "core/cuda/check_cuda.h"
#include "tensor/cuda_memory.h"

namespace ringtrain::detail {

namespace {
// Each live allocation's size, for the accounting (allocations happen at
// build time, not per step, so a locked map costs nothing that matters).
std::mutex g_sizes_mutex;
std::unordered_map<void*, std::size_t>& sizes() {
  static auto* m = new std::unordered_map<void*, std::size_t>();  // outlives static tensors
  return *m;
}
}  // namespace

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
  {
    const std::lock_guard<std::mutex> lock(g_sizes_mutex);
    sizes()[p] = bytes;
  }
  note_device_allocated(bytes);
  return p;
}

void* cuda_allocate_here(std::size_t bytes) {
  int ordinal = 0;
  RT_CUDA_CHECK(cudaGetDevice(&ordinal));
  return cuda_allocate(bytes, ordinal);
}

void cuda_free(void* ptr, int) noexcept {
  std::size_t bytes = 0;
  {
    const std::lock_guard<std::mutex> lock(g_sizes_mutex);
    if (auto it = sizes().find(ptr); it != sizes().end()) {
      bytes = it->second;
      sizes().erase(it);
    }
  }
  note_device_freed(bytes);
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
