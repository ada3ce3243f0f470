// The CUDA half of device_memory, behind plain C++ signatures: implemented in
// src/tensor/cuda/cuda_memory.cpp, or by cuda_memory_nocuda.cpp with an Error.
#pragma once

#include <cstddef>

namespace ringtrain::detail {

void* cuda_allocate(std::size_t bytes, int ordinal);
void cuda_free(void* ptr, int ordinal) noexcept;
void cuda_zero(void* ptr, std::size_t bytes, int ordinal);
void cuda_synchronize(int ordinal);

}  // namespace ringtrain::detail
