// The CUDA half of copy_view, behind plain C++ signatures: implemented in
// src/core/cuda/device_transfer.cpp, or by device_transfer_nocuda.cpp with an Error.
#pragma once

#include <cstddef>

namespace ringtrain::detail {

// A copy on the legacy default stream, complete on the device when it returns (cudaMemcpyDefault:
// unified addressing tells host from device), after that stream has waited on `event` (a
// cudaEvent_t, or nullptr).
void cuda_copy_bytes(void* dst, const void* src, std::size_t bytes, void* event);

}  // namespace ringtrain::detail
