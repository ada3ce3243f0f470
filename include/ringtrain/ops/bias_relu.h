// Fused conv bias + ReLU over an activation laid out [outer, channels, inner]
// (NCHW: [N, C, H*W]; NHWC: [N*H*W, C, 1]), the two passes the model's fused
// conv + bias + ReLU node runs around the convolution
// (model/fused_conv_relu.h). Each gives the bits of the unfused ops it
// replaces (bias_add then relu; relu's backward then bias_grad).
#pragma once

#include <cstddef>

#include "ringtrain/core/buffer_view.h"
#include "ringtrain/ops/compute_context.h"

namespace ringtrain {

// y = relu(x + bias[c]): the sum in fp32 rounded to y's storage dtype as
// bias_add stores it, relu, one store. x of y's dtype or f32 (the
// convolution's fp32 output); x may be y.
void bias_relu_into(const ComputeContext& ctx, BufferView y, BufferView x, const float* bias,
                    std::size_t outer, std::size_t channels, std::size_t inner);
// In one pass: masked = (y > 0 ? dy : 0), relu's backward (y, dy of the
// storage dtype; masked of it or f32), and dbias[c] = (accumulate ? dbias[c] :
// 0) + the sum of channel c's masked values, in bias_grad's order.
void relu_mask_bias_grad(const ComputeContext& ctx, BufferView y, BufferView dy, BufferView masked,
                         float* dbias, std::size_t outer, std::size_t channels, std::size_t inner,
                         bool accumulate);

}  // namespace ringtrain
