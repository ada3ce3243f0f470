// LayerNorm's row arithmetic (kernels/layer_norm.cuh) spread over a warp, for
// the plain layer_norm kernels (kernels/transformer.cu) and the fused residual
// add + LayerNorm (kernels/residual_layer_norm.cu): one code, so the fused
// node gives the unfused plan's bits on a GPU too.
#pragma once

#include <math.h>

#include "kernels/layer_norm.cuh"
#include "kernels/storage.cuh"
#include "kernels/warp_rows.cuh"

namespace ringtrain::kernels {

// A row's forward, given each lane's sum of its columns of x: mean, biased
// variance and y = xhat * w + b; lane 0 writes the row's mean and rstd.
template <typename T>
__device__ __forceinline__ void warp_layer_norm_row(const T* xr, float lane_sum, unsigned c,
                                                    unsigned lane, float eps, const float* w,
                                                    const float* b, T* yr, float* mean_out,
                                                    float* rstd_out) {
  const float mean = warp_sum(lane_sum) / static_cast<float>(c);
  float v = 0.0f;
  for (unsigned j = lane; j < c; j += kWarp) v += (load(xr, j) - mean) * (load(xr, j) - mean);
  const float rstd = 1.0f / sqrtf(warp_sum(v) / static_cast<float>(c) + eps);
  for (unsigned j = lane; j < c; j += kWarp)
    store(yr, j, (load(xr, j) - mean) * rstd * w[j] + b[j]);
  if (lane == 0) {
    *mean_out = mean;
    *rstd_out = rstd;
  }
}

// A row's backward sums (the means of dy * w and of dy * w * xhat). The
// weight gradient's per-row terms, dy * xhat, are
// kernels/layer_norm_param_grad.cu's.
template <typename T>
__device__ __forceinline__ LayerNormRowSums warp_layer_norm_backward_sums(const T* xr, const T* dyr,
                                                                          const float* w,
                                                                          unsigned c, unsigned lane,
                                                                          float mean, float rstd) {
  float g_sum = 0.0f, gx_sum = 0.0f;
  for (unsigned j = lane; j < c; j += kWarp) {
    const float xhat = (load(xr, j) - mean) * rstd;
    const float g = load(dyr, j) * w[j];
    g_sum += g;
    gx_sum += g * xhat;
  }
  return LayerNormRowSums{warp_sum(g_sum) / static_cast<float>(c),
                          warp_sum(gx_sum) / static_cast<float>(c)};
}

}  // namespace ringtrain::kernels
