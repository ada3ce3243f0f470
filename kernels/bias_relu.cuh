// Fused conv bias + ReLU, one element each: shared by kernels/bias_relu.cu and
// the CPU loops in src/ops/bias_relu.cpp.
//
// The fused form must give the unfused plan's bits (conv, bias_add, relu).
// The unfused plan rounds conv + bias to the storage type T (bias_add's
// store), then relu reads it: relu(round(v)). The fused pass stores
// round(relu(v)), the same bits for every v: rounding to nearest even is
// monotone and keeps the sign of zero, so v > 0 rounds to a value >= +0 (+0,
// or +inf in fp16) that relu keeps, and v <= 0, -0 or NaN give +0 both ways
// (positive_part maps -0 and NaN to +0, as relu does). fused_conv_relu_test
// checks the edge cases (-0 + -0, tiny sums that round to +-0, overflow,
// NaN). Backward masks dy with the stored output, exactly as relu's stored
// dx did, and the bias gradient sums those masked values in bias_grad's order.
#pragma once

#include "kernels/batch_norm_relu.cuh"
#include "kernels/bias.cuh"

namespace ringtrain::kernels {

// relu(x + bias), x the convolution's output; the caller's store<T> rounds it
// once (above: the bits of bias_add's store, then relu's).
RT_HD float bias_relu_forward_element(float x, float bias) {
  const float v = bias_add_element(x, bias);
  return positive_part(v, v);  // relu_forward_element(v)
}

// The gradient reaching the convolution's output: relu_backward_element(y, dy).
RT_HD float relu_masked_dy(float y, float dy) {
  return positive_part(y, dy);
}

}  // namespace ringtrain::kernels
