// Fused softmax + cross-entropy for one row of logits. Shared by
// kernels/softmax_cross_entropy.cu (one thread per narrow row; a wide row's
// block takes its loss, target and verdicts from here, its sums in its own
// order) and the CPU path.
// Works from the row maximum, so large logits do not overflow exp. The logits
// and their gradient are in a storage type (kernels/storage.cuh: fp32, or the
// 16-bit logits of --precision bf16/fp16), read with load and written with
// store; the arithmetic is fp32 whatever the storage.
#pragma once

#include <math.h>

#include "kernels/host_device.cuh"
#include "kernels/storage.cuh"

namespace ringtrain::kernels {

// A label the loss skips (ringtrain/data/token_data.h's kIgnoreLabel,
// PyTorch's ignore_index): loss 0, no gradient, not counted.
inline constexpr int kIgnoredLabel = -100;
inline constexpr int kIgnoredRow = -2;  // `correct` of an ignored row

// Mixed targets (mixup, cutmix): a row's target is lam onehot(label) +
// (1 - lam) onehot(second). A row without a mix passes second == label and
// lam == 1, which is the one-hot loss bit for bit (the mixed terms are only
// computed when the two labels differ and lam != 1).
//
// The loss from the row's log-sum-exp and sum of logits: with label
// smoothing e the target is (1 - e) target + e / classes (PyTorch's
// cross_entropy with label_smoothing, on class indices or soft targets
// alike), so the loss is (1 - e) (lam (lse - z[label]) + (1 - lam) (lse -
// z[second])) + e (lse - mean(z)). softmax_ce_loss takes z[label] and
// z[second] as values: a GPU block that writes the gradient over the logits
// reads them before any of its threads writes.
RT_HD float softmax_ce_loss(float z_label, float z_second, float lse, float sum_z, int classes,
                            int label, int second, float lam, float smoothing) {
  float loss = lse - z_label;
  if (second != label && lam != 1.0f) loss = lam * loss + (1.0f - lam) * (lse - z_second);
  if (smoothing > 0.0f)
    loss = (1.0f - smoothing) * loss + smoothing * (lse - sum_z / static_cast<float>(classes));
  return loss;
}
template <typename T>
RT_HD float softmax_ce_row_loss(const T* z, float lse, float sum_z, int classes, int label,
                                int second, float lam, float smoothing) {
  return softmax_ce_loss(load(z, label), load(z, second), lse, sum_z, classes, label, second, lam,
                         smoothing);
}
// The label a mixed row's accuracy counts against: the one with the larger weight
// (the first on a tie).
RT_HD int softmax_ce_accuracy_label(int label, int second, float lam) {
  return lam >= 0.5f ? label : second;
}
// Whether a row's labels are usable: both in [0, classes) (or the first ignored).
RT_HD bool softmax_ce_labels_valid(int label, int second, int classes) {
  return label >= 0 && label < classes && second >= 0 && second < classes;
}

// A row's maximum (its first index: a strict compare) and the sum of
// exp(z - max), which every form of the loss works from.
struct SoftmaxCeRowStats {
  float m;
  int arg;
  float s;
};
template <typename T>
RT_HD SoftmaxCeRowStats softmax_ce_row_stats(const T* z, int classes) {
  SoftmaxCeRowStats st{load(z, 0), 0, 0.0f};
  for (int j = 1; j < classes; ++j)
    if (load(z, j) > st.m) {
      st.m = load(z, j);
      st.arg = j;
    }
  for (int j = 0; j < classes; ++j) st.s += expf(load(z, j) - st.m);
  return st;
}

// Loss -log softmax(z)[label] and whether argmax(z) == label (first maximum
// wins). A label outside [0, classes) gives loss NaN and correct = -1, which the
// host turns into an error naming the row. With label smoothing e the target
// is (1 - e) onehot(label) + e / classes (PyTorch's label_smoothing): the loss
// is (1 - e) (-log p[label]) + e (logsumexp(z) - mean(z)). With a mix (second,
// lam), the target and the accuracy are softmax_ce_row_loss's and
// softmax_ce_accuracy_label's.
template <typename T>
RT_HD void softmax_ce_row_forward(const T* z, int classes, int label, float* loss, int* correct,
                                  float smoothing = 0.0f, int second = -1, float lam = 1.0f) {
  if (label == kIgnoredLabel) {
    *loss = 0.0f;
    *correct = kIgnoredRow;
    return;
  }
  if (second < 0 && lam == 1.0f) second = label;  // no mix
  if (!softmax_ce_labels_valid(label, second, classes)) {
    *loss = nanf("");
    *correct = -1;
    return;
  }
  const SoftmaxCeRowStats st = softmax_ce_row_stats(z, classes);
  const float lse = logf(st.s) + st.m;
  float sum_z = 0.0f;
  if (smoothing > 0.0f)
    for (int j = 0; j < classes; ++j) sum_z += load(z, j);
  *loss = softmax_ce_row_loss(z, lse, sum_z, classes, label, second, lam, smoothing);
  *correct = st.arg == softmax_ce_accuracy_label(label, second, lam) ? 1 : 0;
}

// What backward subtracts from scale * softmax(z)[j]: scale times the
// (smoothed, mixed) target. off for every class, on_label at the label and
// on_second at the second label (the same as on_label when there is no mix).
struct SoftmaxCeTarget {
  float off, on_label, on_second;
};
RT_HD SoftmaxCeTarget softmax_ce_target(int label, int second, float lam, float scale,
                                        float smoothing, int classes) {
  const float off = scale * smoothing / static_cast<float>(classes);
  const float on = scale * (1.0f - smoothing) + off;
  if (second == label || lam == 1.0f) return {off, on, second == label ? on : off};
  return {off, scale * (1.0f - smoothing) * lam + off,
          scale * (1.0f - smoothing) * (1.0f - lam) + off};
}
RT_HD float softmax_ce_target_at(const SoftmaxCeTarget& t, int j, int label, int second) {
  return j == label ? t.on_label : j == second ? t.on_second : t.off;
}
// dz[j] = exp(z[j] - m) * inv - target[j], inv the scale over the exp-sum.
template <typename T, typename G>
RT_HD void softmax_ce_row_gradient(const T* z, G* dz, int classes, float m, float inv,
                                   const SoftmaxCeTarget& t, int label, int second) {
  for (int j = 0; j < classes; ++j)
    store(dz, j, expf(load(z, j) - m) * inv - softmax_ce_target_at(t, j, label, second));
}

// dz = scale * (softmax(z) - target), target the (smoothed, mixed) one-hot
// label; scale is grad_scale / batch for a mean reduction.
// dz may be 16-bit: each value is computed in fp32 and rounded once, as it is
// stored.
template <typename T, typename G>
RT_HD void softmax_ce_row_backward(const T* z, int classes, int label, float scale, G* dz,
                                   float smoothing = 0.0f, int second = -1, float lam = 1.0f) {
  if (label == kIgnoredLabel) {
    for (int j = 0; j < classes; ++j) store(dz, j, 0.0f);
    return;
  }
  if (second < 0 && lam == 1.0f) second = label;  // no mix
  const SoftmaxCeRowStats st = softmax_ce_row_stats(z, classes);
  softmax_ce_row_gradient(z, dz, classes, st.m, scale / st.s,
                          softmax_ce_target(label, second, lam, scale, smoothing, classes), label,
                          second);
}

// The fused classifier (llm.c's fused_classifier): the row's loss and
// correct flag as softmax_ce_row_forward gives them, then its gradient as
// softmax_ce_row_backward writes it, in one call that reads the logits once
// for both (max, exp-sum, and the label's logits before any is overwritten).
// dz may be z itself (the same type): the loss is taken before the gradient
// is stored. The same operations in the same order as the two calls, so the
// same bits: the maximum by the forward's strict compare (the backward's
// gives the same value), the exp-sum by one loop.
template <typename T, typename G>
RT_HD void softmax_ce_row_forward_backward(const T* z, int classes, int label, float scale, G* dz,
                                           float* loss, int* correct, float smoothing = 0.0f,
                                           int second = -1, float lam = 1.0f) {
  if (label == kIgnoredLabel) {
    *loss = 0.0f;
    *correct = kIgnoredRow;
    for (int j = 0; j < classes; ++j) store(dz, j, 0.0f);
    return;
  }
  if (second < 0 && lam == 1.0f) second = label;  // no mix
  const SoftmaxCeRowStats st = softmax_ce_row_stats(z, classes);
  if (softmax_ce_labels_valid(label, second, classes)) {
    const float lse = logf(st.s) + st.m;
    float sum_z = 0.0f;
    if (smoothing > 0.0f)
      for (int j = 0; j < classes; ++j) sum_z += load(z, j);
    *loss = softmax_ce_row_loss(z, lse, sum_z, classes, label, second, lam, smoothing);
    *correct = st.arg == softmax_ce_accuracy_label(label, second, lam) ? 1 : 0;
  } else {
    *loss = nanf("");
    *correct = -1;
  }
  softmax_ce_row_gradient(z, dz, classes, st.m, scale / st.s,
                          softmax_ce_target(label, second, lam, scale, smoothing, classes), label,
                          second);
}

// A row of logits stored `stride` apart (>= classes: the tied LM head's
// padded vocabulary, as llm.c keeps its logits) holds stride - classes
// padded values that no loss reads; its gradient's padded values are written
// 0, so that the head's products over the padded width add nothing.
template <typename G>
RT_HD void softmax_ce_row_zero_padding(G* dz, int classes, int stride) {
  for (int j = classes; j < stride; ++j) store(dz, j, 0.0f);
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
