// The row operations of causal self-attention: query i attends to keys 0..i.
// Scores S = Q K^T * scale come from a GEMM; these turn a row of S into the
// attention weights P and take P's gradient back to S. Shared by the CPU
// layer and, later, a CUDA kernel.
#pragma once

#include <math.h>

#include "kernels/host_device.cuh"

namespace ringtrain::kernels {

// p[0..i] = softmax(s[0..i]); p[i+1..t) = 0 (the future is masked).
RT_HD void causal_softmax_row(const float* s, int i, int t, float* p) {
  float m = s[0];
  for (int j = 1; j <= i; ++j) m = s[j] > m ? s[j] : m;
  float sum = 0.0f;
  for (int j = 0; j <= i; ++j) {
    p[j] = expf(s[j] - m);
    sum += p[j];
  }
  const float inv = 1.0f / sum;
  for (int j = 0; j <= i; ++j) p[j] *= inv;
  for (int j = i + 1; j < t; ++j) p[j] = 0.0f;
}

// ds = scale * p * (dp - sum_j p_j dp_j): the softmax's Jacobian, with the
// score scale folded in. Masked entries (p = 0) get 0.
RT_HD void causal_softmax_row_backward(const float* p, const float* dp, int i, int t, float scale,
                                       float* ds) {
  float dot = 0.0f;
  for (int j = 0; j <= i; ++j) dot += p[j] * dp[j];
  for (int j = 0; j <= i; ++j) ds[j] = scale * p[j] * (dp[j] - dot);
  for (int j = i + 1; j < t; ++j) ds[j] = 0.0f;
}

}  // namespace ringtrain::kernels
