// A residual add fused with the LayerNorm that reads its sum: sum = x0 +
// scale x1 and y = layer_norm(sum), forward and backward, in the model's
// storage dtype (f32, bf16, f16). The model's plan uses them where an add's
// sum is read by a layer_norm (GPT-2's residual stream: x + attn -> ln_2,
// x + mlp -> ln_1, ln_f), and keeps the sum, which later adds read. They give
// the unfused ops' bits (kernels/residual_layer_norm.cuh): forward stores the
// sum as sum_two_stored does and normalises it as layer_norm_forward does;
// backward adds LayerNorm's dx to the sum's gradient as the model adds a
// reader's contribution, rounds it once, and writes the add's two input
// gradients in the same pass, where the unfused plan takes four (a dx, the
// fp32 add, the rounding, each input's copy).
#pragma once

#include <cstddef>

#include "ringtrain/core/buffer_view.h"
#include "ringtrain/ops/compute_context.h"

namespace ringtrain {

// rows of c; w, b, mean and rstd as layer_norm_forward's.
void residual_layer_norm_forward(const ComputeContext& ctx, BufferView x0, BufferView x1,
                                 float scale, const float* w, const float* b, std::size_t rows,
                                 std::size_t c, float eps, BufferView sum, BufferView y,
                                 float* mean, float* rstd);

// `sum` and dy as the forward stored them. d_sum: the sum's gradient buffer
// (fp32 where the model sums several readers, else the storage dtype);
// `summed`: it holds the contributions of the sum's later readers, to which
// LayerNorm's dx is added; the total is rounded to the storage dtype once
// (d_sum itself is not written). dx0 = that gradient, dx1 = scale times it
// (null ptrs: not wanted; the storage dtype or f32). dw and db as
// layer_norm_backward.
void residual_layer_norm_backward(const ComputeContext& ctx, BufferView sum, const float* w,
                                  BufferView dy, std::size_t rows, std::size_t c, const float* mean,
                                  const float* rstd, BufferView d_sum, bool summed, float scale,
                                  BufferView dx0, BufferView dx1, float* dw, float* db,
                                  bool accumulate);

}  // namespace ringtrain
