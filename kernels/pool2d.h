// Host-side launchers for kernels/pool2d.cu. Streams travel as void*.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/pool2d.cuh"
#include "ringtrain/core/dtype.h"

namespace ringtrain::kernels {

// x [batch, channels, H, W] (or channels-last when nhwc) -> y of the output
// shape, in the same layout. Max writes each output's argmax (an index within
// its input plane) to argmax, laid out as y; average ignores argmax.
// x and y of the storage dtype t (f32, bf16, f16), read and written through
// kernels/storage.cuh.
void pool2d_forward_cuda(const void* x, void* y, DType t, std::int32_t* argmax, std::size_t batch,
                         std::size_t channels, const PoolShape& shape, bool max, bool nhwc,
                         void* stream);
// dx (overwritten, of dx_type: t or f32) from dy (of t) and, for max, the
// argmax of the matching forward.
void pool2d_backward_cuda(const void* dy, DType t, const std::int32_t* argmax, void* dx,
                          DType dx_type, std::size_t batch, std::size_t channels,
                          const PoolShape& shape, bool max, bool nhwc, void* stream);

}  // namespace ringtrain::kernels
