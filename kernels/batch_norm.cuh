// BatchNorm's per-element arithmetic, shared by kernels/batch_norm.cu and the
// CPU loops in src/ops/batch_norm.cpp. A channel's statistics come from its
// sums over (batch, height, width); gamma/beta are null without affine. Each
// operation is rounded on its own (kernels/rounded_arithmetic.cuh), so an
// element's value from the same inputs is the CPU's, bit for bit, and does not
// hang on where nvcc would fuse a product into a sum. (The statistics and
// backward's sums, which the CPU takes in another order, still differ.)
#pragma once

#include <math.h>

#include <cstddef>

#include "kernels/host_device.cuh"
#include "kernels/rounded_arithmetic.cuh"

namespace ringtrain::kernels {

// 1 / sqrt(var + eps): var is the biased (population) variance of the batch.
RT_HD float bn_invstd(float var, float eps) {
  return 1.0f / sqrtf(var + eps);
}

// PyTorch's running update: the running variance takes the unbiased estimate.
RT_HD float bn_running_mean(float running, float mean, float momentum) {
  return add_rn(mul_rn(sub_rn(1.0f, momentum), running), mul_rn(momentum, mean));
}
RT_HD float bn_running_var(float running, float var, float count, float momentum) {
  const float unbiased = count > 1.0f ? div_rn(mul_rn(var, count), sub_rn(count, 1.0f)) : var;
  return add_rn(mul_rn(sub_rn(1.0f, momentum), running), mul_rn(momentum, unbiased));
}

RT_HD float bn_apply_element(float x, float mean, float invstd, const float* gamma,
                             const float* beta, int c) {
  const float xhat = mul_rn(sub_rn(x, mean), invstd);
  return gamma != nullptr ? add_rn(mul_rn(xhat, gamma[c]), beta[c]) : xhat;
}

// dx of training-mode BatchNorm, from the channel's sums of dy and dy * xhat:
// dx = gamma invstd / n (n dy - sum(dy) - xhat sum(dy xhat)).
RT_HD float bn_backward_element(float x, float dy, float mean, float invstd, float gamma,
                                float sum_dy, float sum_dy_xhat, float count) {
  const float xhat = mul_rn(sub_rn(x, mean), invstd);
  return mul_rn(div_rn(mul_rn(gamma, invstd), count),
                sub_rn(sub_rn(mul_rn(count, dy), sum_dy), mul_rn(xhat, sum_dy_xhat)));
}

// One element's terms of backward's sums: dy and dy * xhat.
RT_HD float bn_dy_xhat(float dy, float x, float mean, float invstd) {
  return mul_rn(mul_rn(dy, sub_rn(x, mean)), invstd);
}

// What backward's per-channel reduction (kernels/channel_reduce.cuh) makes of
// a channel's totals t.v[0] = sum(dy), t.v[1] = sum(dy xhat): sums[c] and
// sums[C + c], and dgamma, dbeta (if not null) overwritten or added to. The
// plain and the fused backward (kernels/batch_norm_relu.cu) share it.
struct BnBackwardFinish {
  float* sums;
  std::size_t channels;
  float* dgamma;
  float* dbeta;
  bool accumulate;
  template <typename Totals>
  RT_HD void operator()(std::size_t c, const Totals& t) const {
    sums[c] = t.v[0];
    sums[channels + c] = t.v[1];
    if (dgamma != nullptr) dgamma[c] = accumulate ? dgamma[c] + t.v[1] : t.v[1];
    if (dbeta != nullptr) dbeta[c] = accumulate ? dbeta[c] + t.v[0] : t.v[0];
  }
};

}  // namespace ringtrain::kernels
