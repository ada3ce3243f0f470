// Host-side launchers for kernels/pool2d.cu. Streams travel as void*.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/pool2d.cuh"

namespace ringtrain::kernels {

// x [batch, channels, H, W] (or channels-last when nhwc) -> y of the output
// shape, in the same layout. Max writes each output's argmax (an index within
// its input plane) to argmax, laid out as y; average ignores argmax.
void pool2d_forward_cuda(const float* x, float* y, std::int32_t* argmax, std::size_t batch,
                         std::size_t channels, const PoolShape& shape, bool max, bool nhwc,
                         void* stream);
// dx (overwritten) from dy and, for max, the argmax of the matching forward.
void pool2d_backward_cuda(const float* dy, const std::int32_t* argmax, float* dx, std::size_t batch,
                          std::size_t channels, const PoolShape& shape, bool max, bool nhwc,
                          void* stream);

}  // namespace ringtrain::kernels
