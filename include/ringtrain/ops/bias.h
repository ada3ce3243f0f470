// Per-channel bias over an activation laid out [outer, channels, inner]:
// Linear has inner = 1, Conv2d has inner = H*W (NCHW).
#pragma once

#include <cstddef>

#include "ringtrain/core/buffer_view.h"
#include "ringtrain/ops/compute_context.h"

namespace ringtrain {

// y[o, c, i] += bias[c]
void bias_add(const ComputeContext& ctx, float* y, const float* bias, std::size_t outer,
              std::size_t channels, std::size_t inner);
// dbias[c] = (accumulate ? dbias[c] : 0) + sum over o, i of dy[o, c, i]
void bias_grad(const ComputeContext& ctx, const float* dy, float* dbias, std::size_t outer,
               std::size_t channels, std::size_t inner, bool accumulate);

// The stored forms: y and dy are views of the model's storage dtype (f32,
// bf16, f16); y + bias is computed in fp32 and rounded once, dy summed in fp32.
void bias_add(const ComputeContext& ctx, BufferView y, const float* bias, std::size_t outer,
              std::size_t channels, std::size_t inner);
void bias_grad(const ComputeContext& ctx, BufferView dy, float* dbias, std::size_t outer,
               std::size_t channels, std::size_t inner, bool accumulate);
// y = x + bias, x of any storage dtype (a product's fp32 output) and y of the
// model's: the sum in fp32, rounded once into y.
void bias_add_into(const ComputeContext& ctx, BufferView y, BufferView x, const float* bias,
                   std::size_t outer, std::size_t channels, std::size_t inner);

}  // namespace ringtrain
