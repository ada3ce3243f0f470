// Elementwise activations, one element each. Shared by
// kernels/activation.cu and the CPU loops in src/ops/activation.cpp.
#pragma once

#include <math.h>

#include "kernels/host_device.cuh"

namespace ringtrain::kernels {

RT_HD float relu_forward_element(float x) {
  return x > 0.0f ? x : 0.0f;
}
// Uses the output: y > 0 exactly where x > 0, and y is what forward kept.
RT_HD float relu_backward_element(float y, float dy) {
  return y > 0.0f ? dy : 0.0f;
}

// Exact GELU, x * Phi(x), as PyTorch's default (approximate='none').
RT_HD float gelu_forward_element(float x) {
  return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f));
}
// d/dx [x Phi(x)] = Phi(x) + x phi(x).
RT_HD float gelu_backward_element(float x, float dy) {
  const float cdf = 0.5f * (1.0f + erff(x * 0.70710678118654752f));
  const float pdf = 0.39894228040143268f * expf(-0.5f * x * x);
  return dy * (cdf + x * pdf);
}

// tanh(u) = 1 - 2 / (exp(2u) + 1): one expf, several times cheaper than
// tanhf on the CPU (which spends a profiled third of a gpt-nano step in it);
// the absolute error stays at float rounding, and +-inf saturate to +-1.
RT_HD float tanh_by_exp(float u) {
  return 1.0f - 2.0f / (expf(2.0f * u) + 1.0f);
}

// GELU in GPT-2's tanh form (PyTorch's approximate='tanh'):
// 0.5 x (1 + tanh(u)), u = sqrt(2/pi) (x + 0.044715 x^3).
RT_HD float gelu_tanh_forward_element(float x) {
  const float u = 0.79788456080286536f * (x + 0.044715f * x * x * x);
  return 0.5f * x * (1.0f + tanh_by_exp(u));
}
// d/dx = 0.5 (1 + tanh u) + 0.5 x (1 - tanh^2 u) du/dx.
RT_HD float gelu_tanh_backward_element(float x, float dy) {
  const float u = 0.79788456080286536f * (x + 0.044715f * x * x * x);
  const float t = tanh_by_exp(u);
  const float du = 0.79788456080286536f * (1.0f + 3.0f * 0.044715f * x * x);
  return dy * (0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * du);
}

}  // namespace ringtrain::kernels
