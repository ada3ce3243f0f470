// The clip factor of --clip-norm from the squared global norm, as PyTorch's
// clip_grad_norm_: max_norm / (norm + 1e-6) when norm > max_norm, else 1; a
// non-finite norm leaves the gradients alone (the --nonfinite guard decides).
// Computed on the device by kernels/grad_clip.cu (no host sync in a step) and
// on the host by src/optim/grad_clip.cpp, from the same function.
#pragma once

#include <math.h>

#include "kernels/host_device.cuh"

namespace ringtrain::kernels {

RT_HD bool finite_double(double x) {
  return x - x == 0.0;  // NaN and +-Inf give NaN
}

RT_HD float clip_factor(double norm, double max_norm) {
  if (!finite_double(norm) || !(norm > max_norm)) return 1.f;
  return static_cast<float>(max_norm / (norm + 1e-6));
}

// From the sum of squares (the norm is its correctly rounded square root on
// both sides).
RT_HD float clip_factor_of_sum(double sum_squares, double max_norm) {
  return clip_factor(sqrt(sum_squares), max_norm);
}

// 0 for a finite sum of squares, NaN otherwise: a one-element stand-in for a
// gradient buffer whose norm was summed shard by shard (ZeRO-1), for the
// --nonfinite guard's check of the averaged gradients.
RT_HD float finite_probe(double sum_squares) {
  return finite_double(sum_squares) ? 0.f : static_cast<float>(NAN);
}

}  // namespace ringtrain::kernels
