// BatchNorm fused with the ReLU after it, and with a residual add between
// them: y = relu(bn(x)) or relu(bn(x) + residual), forward and backward, in
// the model's storage dtype (f32, bf16, f16). The model's plan uses them where
// BatchNorm's output and the add's have no other reader (a ResNet's bn -> relu
// and bn -> add -> relu). They give the unfused ops' bits: the same
// statistics and reductions as batch_norm_forward/_backward, and every value
// the unfused ops store rounded as it was stored (kernels/batch_norm_relu.cuh).
// What they save is the passes over the data and the intermediate tensors:
// forward reads x (and the residual) and writes y once; backward reads x, y
// (or, without a residual, computes it again) and dy and writes dx and the
// residual's gradient in one pass after BatchNorm's sums.
#pragma once

#include <cstddef>

#include "ringtrain/core/buffer_view.h"
#include "ringtrain/ops/batch_norm.h"
#include "ringtrain/ops/compute_context.h"

namespace ringtrain {

// Forward: as batch_norm_forward (same arguments), then the add of
// `residual` (a null ptr: none; else of x's dtype and size), then relu.
void batch_norm_relu_forward(const ComputeContext& ctx, const BatchNormShape& s, BufferView x,
                             BufferView residual, BufferView y, std::size_t batch, bool training,
                             bool update_running, float eps, float momentum, const float* gamma,
                             const float* beta, float* running_mean, float* running_var,
                             const BatchNormSaved& saved, BatchStatReducer* sync = nullptr);

// Backward of a training-mode forward: y is the forward's output, dy its
// gradient (both of the storage dtype). dx as batch_norm_backward writes it;
// d_residual (a null ptr: not wanted; the storage dtype or f32) = dy masked by
// y > 0, which is the residual's gradient. dgamma and dbeta as
// batch_norm_backward, from the masked dy. d_residual overlaps none of x, y,
// dy and dx (a GPU writes it while it reads them, then reads it for dx).
// Where the forward had no residual (then d_residual must be null too: a
// null y with a residual gradient is refused) and the storage dtype is the
// context's precision, y may be a null ptr: relu's mask then comes from BatchNorm's
// value computed again from x, the saved statistics, gamma and beta
// (unchanged since the forward), compared with what rounds to 0 in the
// storage dtype: y's mask, bit for bit, without reading y, so that the
// memory-bound passes of a GPU read 2 bytes an element less.
// dy_addend (a null ptr: none; else of dy's dtype and size): the output's
// gradient in two terms (a ResNet block's output, read by the next block's
// convolution and its add), dy + dy_addend rounded to the storage dtype as
// sum_two_stored(dy, dy, dy_addend, 1) stores it: the same bits, without
// the pass that writes the sum and the one that reads it back.
void batch_norm_relu_backward(const ComputeContext& ctx, const BatchNormShape& s, BufferView x,
                              BufferView y, BufferView dy, BufferView dx, BufferView d_residual,
                              std::size_t batch, const float* gamma, const float* beta,
                              const BatchNormSaved& saved, float* dgamma, float* dbeta,
                              bool accumulate, BatchStatReducer* sync = nullptr,
                              BufferView dy_addend = {});

}  // namespace ringtrain
