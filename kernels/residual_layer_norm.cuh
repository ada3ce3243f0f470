// A residual add fused with the LayerNorm that reads its sum (GPT-2's
// x + attn -> ln_2, x + mlp -> ln_1 and ln_f), one row of C features each:
// shared by kernels/residual_layer_norm.cu and the CPU loops in
// src/ops/residual_layer_norm.cpp.
//
// The fused form gives the unfused plan's bits. Forward stores the sum as
// the add does (sum_two_stored: axpy_element, rounded to T) and normalises
// the stored sum, as layer_norm_forward reads it. Backward is the add's
// gradient at its branch point: LayerNorm's dx joins the contributions the
// sum's later readers already added in fp32 (the model's summed gradient),
// then is rounded once to T, as the model rounds it before the add's
// backward, which scales it into each input's gradient (scale_stored).
#pragma once

#include "kernels/axpy.cuh"
#include "kernels/batch_norm_relu.cuh"
#include "kernels/host_device.cuh"
#include "kernels/layer_norm.cuh"
#include "kernels/rounded_arithmetic.cuh"
#include "kernels/scale.cuh"
#include "kernels/storage.cuh"

namespace ringtrain::kernels {

// One element of the sum, as AddLayer stores it: x0 + scale x1.
RT_HD float residual_sum_element(float x0, float x1, float scale) {
  return axpy_element(scale, x1, x0);
}

// The sum's gradient as the add's backward reads it: LayerNorm's dx, after
// the earlier readers' fp32 sum where there is one (`summed`), on T's grid.
template <typename T>
RT_HD float residual_gradient_element(float dx, bool summed, float earlier) {
  // add_rn: never contracted into a multiply before it (the unfused plan adds
  // a stored dx, add_scaled, so the GPU must not fuse dx's last product).
  return through_storage<T>(summed ? add_rn(earlier, dx) : dx);
}

// sum = x0 + scale x1 and y = layer_norm(sum), keeping the row's mean and
// 1/std for backward; every buffer of the storage type T.
template <typename T>
RT_HD void residual_layer_norm_row_forward(const T* x0, const T* x1, float scale,
                                           const float* weight, const float* bias, int c, float eps,
                                           T* sum, T* y, float* mean_out, float* rstd_out) {
  for (int j = 0; j < c; ++j) store(sum, j, residual_sum_element(load(x0, j), load(x1, j), scale));
  layer_norm_row_forward(static_cast<const T*>(sum), weight, bias, c, eps, y, mean_out, rstd_out);
}

// Backward over the stored sum: dweight and dbias as layer_norm_row_backward;
// g = the sum's gradient (residual_gradient_element, d_sum of G: fp32 where
// the model sums, else T; `summed`: it holds earlier contributions); then
// dx0 = g and dx1 = scale g (each null: not wanted; of T or fp32).
template <typename T, typename G, typename D0, typename D1>
RT_HD void residual_layer_norm_row_backward(const T* sum, const float* weight, const T* dy, int c,
                                            float mean, float rstd, const G* d_sum, bool summed,
                                            float scale, D0* dx0, D1* dx1, float* dweight,
                                            float* dbias) {
  const LayerNormRowSums s =
      layer_norm_row_backward_sums(sum, weight, dy, c, mean, rstd, dweight, dbias);
  for (int j = 0; j < c; ++j) {
    const float dx = layer_norm_dx_element(load(sum, j), load(dy, j), weight[j], mean, rstd, s);
    const float g = residual_gradient_element<T>(dx, summed, summed ? load(d_sum, j) : 0.0f);
    if (dx0 != nullptr) store(dx0, j, scale_element(g, 1.0f));
    if (dx1 != nullptr) store(dx1, j, scale_element(g, scale));
  }
}

}  // namespace ringtrain::kernels
