// Fused softmax + cross-entropy for one row of logits. Shared by
// kernels/softmax_cross_entropy.cu (one thread per row) and the CPU path.
// Works from the row maximum, so large logits do not overflow exp.
#pragma once

#include <math.h>

#include "kernels/host_device.cuh"

namespace ringtrain::kernels {

// A label the loss skips (ringtrain/data/token_data.h's kIgnoreLabel,
// PyTorch's ignore_index): loss 0, no gradient, not counted.
inline constexpr int kIgnoredLabel = -100;
inline constexpr int kIgnoredRow = -2;  // `correct` of an ignored row

// Loss -log softmax(z)[label] and whether argmax(z) == label (first maximum
// wins). A label outside [0, classes) gives loss NaN and correct = -1, which the
// host turns into an error naming the row. With label smoothing e the target
// is (1 - e) onehot(label) + e / classes (PyTorch's label_smoothing): the loss
// is (1 - e) (-log p[label]) + e (logsumexp(z) - mean(z)).
RT_HD void softmax_ce_row_forward(const float* z, int classes, int label, float* loss, int* correct,
                                  float smoothing = 0.0f) {
  if (label == kIgnoredLabel) {
    *loss = 0.0f;
    *correct = kIgnoredRow;
    return;
  }
  if (label < 0 || label >= classes) {
    *loss = nanf("");
    *correct = -1;
    return;
  }
  float m = z[0];
  int arg = 0;
  for (int j = 1; j < classes; ++j)
    if (z[j] > m) {
      m = z[j];
      arg = j;
    }
  float s = 0.0f;
  for (int j = 0; j < classes; ++j) s += expf(z[j] - m);
  const float lse = logf(s) + m;
  *loss = lse - z[label];
  if (smoothing > 0.0f) {
    float sum_z = 0.0f;
    for (int j = 0; j < classes; ++j) sum_z += z[j];
    *loss = (1.0f - smoothing) * *loss + smoothing * (lse - sum_z / static_cast<float>(classes));
  }
  *correct = arg == label ? 1 : 0;
}

// dz = scale * (softmax(z) - target), target the (smoothed) one-hot label;
// scale is grad_scale / batch for a mean reduction.
RT_HD void softmax_ce_row_backward(const float* z, int classes, int label, float scale, float* dz,
                                   float smoothing = 0.0f) {
  if (label == kIgnoredLabel) {
    for (int j = 0; j < classes; ++j) dz[j] = 0.0f;
    return;
  }
  float m = z[0];
  for (int j = 1; j < classes; ++j) m = z[j] > m ? z[j] : m;
  float s = 0.0f;
  for (int j = 0; j < classes; ++j) s += expf(z[j] - m);
  const float inv = scale / s;
  const float off = scale * smoothing / static_cast<float>(classes);
  const float on = scale * (1.0f - smoothing) + off;
  for (int j = 0; j < classes; ++j) dz[j] = expf(z[j] - m) * inv - (j == label ? on : off);
}

// Running loss totals kept where the model runs: [0] loss sum, [1] correct
// count, [2] rows whose label was out of range (softmax_ce_row_forward gave
// correct = -1). Read once per logging interval instead of once per step.
inline constexpr int kLossTotalsCount = 3;
RT_HD void loss_totals_add_row(float loss, int correct, double* totals) {
  if (correct == kIgnoredRow) return;
  if (correct < 0) {
    totals[2] += 1.0;
    return;
  }
  totals[0] += static_cast<double>(loss);
  totals[1] += static_cast<double>(correct);
}

}  // namespace ringtrain::kernels
