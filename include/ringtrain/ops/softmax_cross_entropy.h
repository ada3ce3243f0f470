// Fused softmax cross-entropy with mean reduction over a [rows, classes] block
// of logits and int32 labels, both on ctx's device. A label of kIgnoreLabel
// (-100, PyTorch's ignore_index) adds no loss and no gradient. The logits and
// their gradient are fp32, or the 16-bit storage of --precision bf16/fp16
// (read widened, the gradient rounded once as it is stored); the loss is
// computed in fp32 either way. The float* forms are the fp32 ones.
//
// The forms with a `stride` take rows `stride` >= classes elements apart (a
// padded vocabulary: the tied LM head's logits under bf16/fp16, as llm.c
// keeps them): the loss and the accuracy read the first `classes` of each
// row only, whatever the padding holds, and the gradient's padded columns
// are written 0. The forms without one are stride = classes.
#pragma once

#include <cstddef>
#include <cstdint>

#include "ringtrain/core/buffer_view.h"
#include "ringtrain/ops/compute_context.h"

namespace ringtrain {

// A mixed target (mixup, cutmix: data/batch_mix.h): row i's target is
// lam * onehot(labels[i]) + (1 - lam) * onehot(second[i]), label smoothing
// applied to that soft target as PyTorch's cross_entropy does. `correct`
// counts against labels[i] when lam >= 0.5, else against second[i]. No
// second labels (the default) is the plain one-hot loss, bit for bit.
struct LabelMix {
  const std::int32_t* second = nullptr;  // rows int32, on ctx's device; null: no mix
  float lam = 1.0f;
  bool active() const { return second != nullptr; }
};

struct SoftmaxCrossEntropyResult {
  double loss_sum = 0;      // sum over rows of -log softmax(z)[label]
  std::size_t correct = 0;  // rows whose argmax is the label
  std::size_t counted = 0;  // rows whose label is not kIgnoreLabel (token_data.h)
};

// `row_loss` / `row_correct` are workspaces of `rows` entries on ctx's device
// (used on the GPU only; may be null on the CPU). A label outside
// [0, classes) is an Error naming the row and the label.
SoftmaxCrossEntropyResult softmax_cross_entropy_forward(
    const ComputeContext& ctx, BufferView logits, const std::int32_t* labels, std::size_t rows,
    std::size_t classes, std::size_t stride, float* row_loss, std::int32_t* row_correct);
inline SoftmaxCrossEntropyResult softmax_cross_entropy_forward(
    const ComputeContext& ctx, BufferView logits, const std::int32_t* labels, std::size_t rows,
    std::size_t classes, float* row_loss, std::int32_t* row_correct) {
  return softmax_cross_entropy_forward(ctx, logits, labels, rows, classes, classes, row_loss,
                                       row_correct);
}
inline SoftmaxCrossEntropyResult softmax_cross_entropy_forward(
    const ComputeContext& ctx, const float* logits, const std::int32_t* labels, std::size_t rows,
    std::size_t classes, float* row_loss, std::int32_t* row_correct) {
  return softmax_cross_entropy_forward(ctx, view_of(logits, rows * classes, ctx.device()), labels,
                                       rows, classes, row_loss, row_correct);
}
// The same loss without a host round trip: adds the rows' loss sum, correct
// count and bad-label count to totals[0..2] (kernels::kLossTotalsCount
// doubles on ctx's device). On the CPU a bad label is an Error at once; on a
// GPU it is counted, for the reader of the totals to report.
void softmax_cross_entropy_accumulate(const ComputeContext& ctx, BufferView logits,
                                      const std::int32_t* labels, std::size_t rows,
                                      std::size_t classes, std::size_t stride, float* row_loss,
                                      std::int32_t* row_correct, double* totals,
                                      float smoothing = 0.0f, const LabelMix& mix = {});
inline void softmax_cross_entropy_accumulate(const ComputeContext& ctx, BufferView logits,
                                             const std::int32_t* labels, std::size_t rows,
                                             std::size_t classes, float* row_loss,
                                             std::int32_t* row_correct, double* totals,
                                             float smoothing = 0.0f, const LabelMix& mix = {}) {
  softmax_cross_entropy_accumulate(ctx, logits, labels, rows, classes, classes, row_loss,
                                   row_correct, totals, smoothing, mix);
}
inline void softmax_cross_entropy_accumulate(const ComputeContext& ctx, const float* logits,
                                             const std::int32_t* labels, std::size_t rows,
                                             std::size_t classes, float* row_loss,
                                             std::int32_t* row_correct, double* totals,
                                             float smoothing = 0.0f, const LabelMix& mix = {}) {
  softmax_cross_entropy_accumulate(ctx, view_of(logits, rows * classes, ctx.device()), labels, rows,
                                   classes, row_loss, row_correct, totals, smoothing, mix);
}
// dlogits may be the logits themselves (of the same dtype): each row is read
// before it is written.
// dlogits = scale * (softmax(logits) - target), target the one-hot label (or
// the mix's soft target) or, with label smoothing e, (1 - e) target + e /
// classes; for the gradient of grad_scale * mean loss, scale = grad_scale / rows.
void softmax_cross_entropy_backward(const ComputeContext& ctx, BufferView logits,
                                    const std::int32_t* labels, std::size_t rows,
                                    std::size_t classes, std::size_t stride, float scale,
                                    BufferView dlogits, float smoothing = 0.0f,
                                    const LabelMix& mix = {});
inline void softmax_cross_entropy_backward(const ComputeContext& ctx, BufferView logits,
                                           const std::int32_t* labels, std::size_t rows,
                                           std::size_t classes, float scale, BufferView dlogits,
                                           float smoothing = 0.0f, const LabelMix& mix = {}) {
  softmax_cross_entropy_backward(ctx, logits, labels, rows, classes, classes, scale, dlogits,
                                 smoothing, mix);
}
inline void softmax_cross_entropy_backward(const ComputeContext& ctx, const float* logits,
                                           const std::int32_t* labels, std::size_t rows,
                                           std::size_t classes, float scale, float* dlogits,
                                           float smoothing = 0.0f, const LabelMix& mix = {}) {
  softmax_cross_entropy_backward(ctx, view_of(logits, rows * classes, ctx.device()), labels, rows,
                                 classes, scale, view_of(dlogits, rows * classes, ctx.device()),
                                 smoothing, mix);
}

// The fused classifier (llm.c's fused_classifier), for a training step whose
// gradient scale is known at its forward: softmax_cross_entropy_accumulate's
// totals and softmax_cross_entropy_backward's dlogits (which may be the
// logits themselves) in one pass over the logits, each row read once for
// both. The same bits as the two calls; evaluation, and wherever the scale
// is not known, keep the two.
void softmax_cross_entropy_accumulate_backward(const ComputeContext& ctx, BufferView logits,
                                               const std::int32_t* labels, std::size_t rows,
                                               std::size_t classes, std::size_t stride,
                                               float* row_loss, std::int32_t* row_correct,
                                               double* totals, float scale, BufferView dlogits,
                                               float smoothing = 0.0f, const LabelMix& mix = {});
inline void softmax_cross_entropy_accumulate_backward(
    const ComputeContext& ctx, BufferView logits, const std::int32_t* labels, std::size_t rows,
    std::size_t classes, float* row_loss, std::int32_t* row_correct, double* totals, float scale,
    BufferView dlogits, float smoothing = 0.0f, const LabelMix& mix = {}) {
  softmax_cross_entropy_accumulate_backward(ctx, logits, labels, rows, classes, classes, row_loss,
                                            row_correct, totals, scale, dlogits, smoothing, mix);
}

}  // namespace ringtrain
