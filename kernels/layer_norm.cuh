// Layer normalisation over one row of C features (GPT-2's ln_1, ln_2, ln_f):
// y = (x - mean) / sqrt(var + eps) * weight + bias, the variance biased as in
// PyTorch. Shared by the CPU layer and, later, its CUDA kernel (one row each).
#pragma once

#include <math.h>

#include "kernels/host_device.cuh"
#include "kernels/rounded_arithmetic.cuh"
#include "kernels/storage.cuh"

namespace ringtrain::kernels {

// Writes y and keeps the row's mean and 1/std for backward. x and y are of
// storage types (kernels/storage.cuh: fp32, or the model's 16-bit buffers),
// the arithmetic fp32.
template <typename T, typename Y>
RT_HD void layer_norm_row_forward(const T* x, const float* weight, const float* bias, int c,
                                  float eps, Y* y, float* mean_out, float* rstd_out) {
  float mean = 0.0f;
  for (int j = 0; j < c; ++j) mean += load(x, j);
  mean /= static_cast<float>(c);
  float var = 0.0f;
  for (int j = 0; j < c; ++j) var += (load(x, j) - mean) * (load(x, j) - mean);
  var /= static_cast<float>(c);
  const float rstd = 1.0f / sqrtf(var + eps);
  for (int j = 0; j < c; ++j) store(y, j, (load(x, j) - mean) * rstd * weight[j] + bias[j]);
  *mean_out = mean;
  *rstd_out = rstd;
}

// One element's term of the weight gradient, dy * xhat, each operation
// rounded on its own (the backward's rows compute xhat so, and a product
// that a GPU pass sums must not fuse into its sum), so that a pass that
// computes it again gives the bits of one that stored it.
RT_HD float layer_norm_dy_xhat(float x, float dy, float mean, float rstd) {
  return mul_rn(dy, mul_rn(sub_rn(x, mean), rstd));
}

// Backward's two row means, mean(g) and mean(g xhat) with g = dy * weight;
// the weight and bias gradients of this row are added to dweight and dbias.
struct LayerNormRowSums {
  float g_mean, gx_mean;
};
template <typename T>
RT_HD LayerNormRowSums layer_norm_row_backward_sums(const T* x, const float* weight, const T* dy,
                                                    int c, float mean, float rstd, float* dweight,
                                                    float* dbias) {
  float g_mean = 0.0f, gx_mean = 0.0f;
  for (int j = 0; j < c; ++j) {
    const float xhat = (load(x, j) - mean) * rstd;
    const float g = load(dy, j) * weight[j];
    g_mean += g;
    gx_mean += g * xhat;
    dweight[j] += layer_norm_dy_xhat(load(x, j), load(dy, j), mean, rstd);
    dbias[j] += load(dy, j);
  }
  g_mean /= static_cast<float>(c);
  gx_mean /= static_cast<float>(c);
  return {g_mean, gx_mean};
}

// dx of one element: rstd (g - mean(g) - xhat mean(g xhat)).
RT_HD float layer_norm_dx_element(float x, float dy, float weight, float mean, float rstd,
                                  LayerNormRowSums s) {
  const float xhat = (x - mean) * rstd;
  return rstd * (dy * weight - s.g_mean - xhat * s.gx_mean);
}

// The row's backward: the sums above, then dx (null: not wanted).
// x and dy of a storage type T, dx of D (T, or fp32 where the model sums).
template <typename T, typename D>
RT_HD void layer_norm_row_backward(const T* x, const float* weight, const T* dy, int c, float mean,
                                   float rstd, D* dx, float* dweight, float* dbias) {
  const LayerNormRowSums s =
      layer_norm_row_backward_sums(x, weight, dy, c, mean, rstd, dweight, dbias);
  if (dx == nullptr) return;
  for (int j = 0; j < c; ++j)
    store(dx, j, layer_norm_dx_element(load(x, j), load(dy, j), weight[j], mean, rstd, s));
}

}  // namespace ringtrain::kernels
