// The CUDA half of device_memory, behind plain C++ signatures: implemented in
// src/tensor/cuda/cuda_memory.cpp, or by cuda_memory_nocuda.cpp with an Error.
#pragma once

#include <cstddef>

namespace ringtrain::detail {

enum class CopyKind { host_to_device, device_to_host, device_to_device };

void* cuda_allocate(std::size_t bytes, int ordinal);
void cuda_free(void* ptr, int ordinal) noexcept;
void cuda_copy(void* dst, const void* src, std::size_t bytes, CopyKind kind);
void cuda_zero(void* ptr, std::size_t bytes, int ordinal);
void cuda_synchronize(int ordinal);

}  // namespace ringtrain::detail
