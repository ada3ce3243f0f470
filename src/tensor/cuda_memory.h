// The CUDA half of device_memory, behind plain C++ signatures: implemented in
// src/tensor/cuda/cuda_memory.cpp, or by cuda_memory_nocuda.cpp with an Error.
#pragma once

#include <cstddef>

namespace ringtrain::detail {

void* cuda_allocate(std::size_t bytes, int ordinal);
// cuda_allocate on the calling thread's current device (left current).
void* cuda_allocate_here(std::size_t bytes);
// The accounting behind device_memory_use (device_memory.cpp): every GPU
// allocation of ringtrain's adds its bytes, and its release takes them off.
// cuda_allocate and cuda_free do it themselves; code that calls cudaMalloc
// directly (workspaces) calls these beside it.
void note_device_allocated(std::size_t bytes) noexcept;
void note_device_freed(std::size_t bytes) noexcept;
void cuda_free(void* ptr, int ordinal) noexcept;
void cuda_zero(void* ptr, std::size_t bytes, int ordinal);
void cuda_synchronize(int ordinal);

}  // namespace ringtrain::detail
