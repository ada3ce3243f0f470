// Layer normalisation over one row of C features (GPT-2's ln_1, ln_2, ln_f):
// y = (x - mean) / sqrt(var + eps) * weight + bias, the variance biased as in
// PyTorch. Shared by the CPU layer and, later, its CUDA kernel (one row each).
#pragma once

#include <math.h>

#include "kernels/host_device.cuh"

namespace ringtrain::kernels {

// Writes y and keeps the row's mean and 1/std for backward.
RT_HD void layer_norm_row_forward(const float* x, const float* weight, const float* bias, int c,
                                  float eps, float* y, float* mean_out, float* rstd_out) {
  float mean = 0.0f;
  for (int j = 0; j < c; ++j) mean += x[j];
  mean /= static_cast<float>(c);
  float var = 0.0f;
  for (int j = 0; j < c; ++j) var += (x[j] - mean) * (x[j] - mean);
  var /= static_cast<float>(c);
  const float rstd = 1.0f / sqrtf(var + eps);
  for (int j = 0; j < c; ++j) y[j] = (x[j] - mean) * rstd * weight[j] + bias[j];
  *mean_out = mean;
  *rstd_out = rstd;
}

// dx = rstd (g - mean(g) - xhat mean(g xhat)), g = dy * weight; the weight
// and bias gradients of this row are added to dweight and dbias.
RT_HD void layer_norm_row_backward(const float* x, const float* weight, const float* dy, int c,
                                   float mean, float rstd, float* dx, float* dweight,
                                   float* dbias) {
  float g_mean = 0.0f, gx_mean = 0.0f;
  for (int j = 0; j < c; ++j) {
    const float xhat = (x[j] - mean) * rstd;
    const float g = dy[j] * weight[j];
    g_mean += g;
    gx_mean += g * xhat;
    dweight[j] += dy[j] * xhat;
    dbias[j] += dy[j];
  }
  g_mean /= static_cast<float>(c);
  gx_mean /= static_cast<float>(c);
  if (dx == nullptr) return;
  for (int j = 0; j < c; ++j) {
    const float xhat = (x[j] - mean) * rstd;
    dx[j] = rstd * (dy[j] * weight[j] - g_mean - xhat * gx_mean);
  }
}

}  // namespace ringtrain::kernels
