// BatchNorm's per-element arithmetic, shared by kernels/batch_norm.cu and the
// CPU loops in src/ops/batch_norm.cpp. A channel's statistics come from its
// sums over (batch, height, width); gamma/beta are null without affine.
#pragma once

#include <math.h>

#include "kernels/host_device.cuh"

namespace ringtrain::kernels {

// 1 / sqrt(var + eps): var is the biased (population) variance of the batch.
RT_HD float bn_invstd(float var, float eps) {
  return 1.0f / sqrtf(var + eps);
}

// PyTorch's running update: the running variance takes the unbiased estimate.
RT_HD float bn_running_mean(float running, float mean, float momentum) {
  return (1.0f - momentum) * running + momentum * mean;
}
RT_HD float bn_running_var(float running, float var, float count, float momentum) {
  const float unbiased = count > 1.0f ? var * count / (count - 1.0f) : var;
  return (1.0f - momentum) * running + momentum * unbiased;
}

RT_HD float bn_apply_element(float x, float mean, float invstd, const float* gamma,
                             const float* beta, int c) {
  const float xhat = (x - mean) * invstd;
  return gamma != nullptr ? xhat * gamma[c] + beta[c] : xhat;
}

// dx of training-mode BatchNorm, from the channel's sums of dy and dy * xhat:
// dx = gamma invstd / n (n dy - sum(dy) - xhat sum(dy xhat)).
RT_HD float bn_backward_element(float x, float dy, float mean, float invstd, float gamma,
                                float sum_dy, float sum_dy_xhat, float count) {
  const float xhat = (x - mean) * invstd;
  return gamma * invstd / count * (count * dy - sum_dy - xhat * sum_dy_xhat);
}

}  // namespace ringtrain::kernels
