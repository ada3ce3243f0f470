// Host-side launchers for kernels/bias_relu.cu: the passes of fused conv bias
// + ReLU over an [outer, channels, inner] tensor (NCHW is [N, C, H*W]; NHWC
// [N*H*W, C, 1]). Streams travel as void*.
#pragma once

#include <cstddef>

#include "ringtrain/core/dtype.h"

namespace ringtrain::kernels {

// y = relu(x + bias[c]), the sum rounded to t as bias_add stores it; x of
// x_type (t or f32) and may be y.
void bias_relu_cuda(const void* x, DType x_type, void* y, DType t, const float* bias,
                    std::size_t outer, std::size_t channels, std::size_t inner, void* stream);
// One pass: masked = (y > 0 ? dy : 0) (y, dy of t; masked of masked_type, t
// or f32) and dbias[c] = (accumulate ? dbias[c] : 0) + the sum of the masked
// values, in bias_grad_cuda's reduction and order (kernels/channel_reduce.cuh).
void relu_mask_bias_grad_cuda(const void* y, const void* dy, DType t, void* masked,
                              DType masked_type, float* dbias, std::size_t outer,
                              std::size_t channels, std::size_t inner, bool accumulate,
                              float* scratch, std::size_t scratch_floats, void* stream);

}  // namespace ringtrain::kernels
