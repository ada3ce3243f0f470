// AdamW arithmetic for one element, shared by kernels/adamw.cu and the CPU loop
// in src/optim/adamw.cpp. Same order of operations as PyTorch's AdamW:
//   p *= 1 - lr * wd                       (decoupled weight decay)
//   m  = b1 * m + (1 - b1) * g
//   v  = b2 * v + (1 - b2) * g^2
//   p -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps)
// The per-step scalars (bias corrections) are computed once on the host, in
// double, and passed in as AdamWCoefficients; a kernel gated by the
// --nonfinite decision recomputes them when steps were skipped on the device.
#pragma once

#include <math.h>

#include "kernels/host_device.cuh"

namespace ringtrain::kernels {

struct AdamWCoefficients {
  float beta1 = 0.9f;
  float beta2 = 0.999f;
  float one_minus_beta1 = 0.1f;
  float one_minus_beta2 = 0.001f;
  float eps = 1e-8f;
  float decay_factor = 1.f;    // 1 - lr * weight_decay
  float step_size = 0.f;       // lr / (1 - beta1^t)
  float inv_sqrt_bias2 = 1.f;  // 1 / sqrt(1 - beta2^t)
  float lr = 0.f;
  unsigned long long step = 1;  // t, 1-based
};

// step_size and inv_sqrt_bias2 for step t, in double: 1 - beta^t loses all
// precision in float for large t.
RT_HD void adamw_bias_correction(AdamWCoefficients& c, unsigned long long t) {
  const double td = static_cast<double>(t);
  const double bias1 = 1.0 - pow(static_cast<double>(c.beta1), td);
  const double bias2 = 1.0 - pow(static_cast<double>(c.beta2), td);
  c.step = t;
  c.step_size = static_cast<float>(static_cast<double>(c.lr) / bias1);
  c.inv_sqrt_bias2 = static_cast<float>(1.0 / sqrt(bias2));
}

// Split in two so the CPU loop can take the square roots in between with
// vector instructions (src/optim/adamw.cpp); adamw_element composes them.
RT_HD void adamw_moments(float g, float& m, float& v, const AdamWCoefficients& c) {
  m = c.beta1 * m + c.one_minus_beta1 * g;
  v = c.beta2 * v + c.one_minus_beta2 * g * g;
}

// The parameter update from the new moments, given sqrt_v = sqrt(v).
RT_HD float adamw_param(float p, float m, float sqrt_v, const AdamWCoefficients& c) {
  return p * c.decay_factor - c.step_size * m / (sqrt_v * c.inv_sqrt_bias2 + c.eps);
}

RT_HD void adamw_element(float& p, float g, float& m, float& v, const AdamWCoefficients& c) {
  adamw_moments(g, m, v, c);
  p = adamw_param(p, m, sqrtf(v), c);
}

// The same for an element that --no-decay exempts (decay factor 1).
RT_HD AdamWCoefficients adamw_without_decay(AdamWCoefficients c) {
  c.decay_factor = 1.f;
  return c;
}

}  // namespace ringtrain::kernels
