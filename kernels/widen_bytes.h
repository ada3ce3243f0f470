// Host-side launcher for kernels/widen_bytes.cu. Streams travel as void*.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/widen_bytes.cuh"

namespace ringtrain::kernels {

// out[i] = widen_element(in, i, w) for i < n, on `stream` (a cudaStream_t).
void widen_bytes_cuda(const std::uint8_t* in, float* out, std::size_t n, const ChannelWidening& w,
                      void* stream);

}  // namespace ringtrain::kernels
