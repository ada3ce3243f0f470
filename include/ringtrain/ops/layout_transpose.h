// Changing the memory order of activations between NCHW and NHWC
// (ringtrain/tensor/layout.h): a batched transpose on the context's device.
#pragma once

#include <cstddef>

#include "ringtrain/core/buffer_view.h"
#include "ringtrain/ops/compute_context.h"

namespace ringtrain {

// y[n, j, i] = x[n, i, j] for x of [batch, rows, cols]; y must not overlap x.
// x and y of storage dtypes each (f32, bf16, f16): a 16-bit activation, or a
// 16-bit gradient into fp32 (narrowing rounds to nearest even).
void transpose_batched(const ComputeContext& ctx, BufferView x, BufferView y, std::size_t batch,
                       std::size_t rows, std::size_t cols);
inline void transpose_batched(const ComputeContext& ctx, const float* x, float* y,
                              std::size_t batch, std::size_t rows, std::size_t cols) {
  const std::size_t n = batch * rows * cols;
  transpose_batched(ctx, view_of(x, n, ctx.device()), view_of(y, n, ctx.device()), batch, rows,
                    cols);
}

// [N, C, H*W] -> [N, H*W, C].
inline void nchw_to_nhwc(const ComputeContext& ctx, const float* x, float* y, std::size_t batch,
                         std::size_t channels, std::size_t hw) {
  transpose_batched(ctx, x, y, batch, channels, hw);
}
// [N, H*W, C] -> [N, C, H*W].
inline void nhwc_to_nchw(const ComputeContext& ctx, const float* x, float* y, std::size_t batch,
                         std::size_t channels, std::size_t hw) {
  transpose_batched(ctx, x, y, batch, hw, channels);
}

}  // namespace ringtrain
