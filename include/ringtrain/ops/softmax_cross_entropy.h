// Fused softmax cross-entropy with mean reduction over a [rows, classes] block
// of logits and int32 labels, both on ctx's device. A label of kIgnoreLabel
// (-100, PyTorch's ignore_index) adds no loss and no gradient.
#pragma once

#include <cstddef>
#include <cstdint>

#include "ringtrain/ops/compute_context.h"

namespace ringtrain {

struct SoftmaxCrossEntropyResult {
  double loss_sum = 0;      // sum over rows of -log softmax(z)[label]
  std::size_t correct = 0;  // rows whose argmax is the label
  std::size_t counted = 0;  // rows whose label is not kIgnoreLabel (token_data.h)
};

// `row_loss` / `row_correct` are workspaces of `rows` entries on ctx's device
// (used on the GPU only; may be null on the CPU). A label outside
// [0, classes) is an Error naming the row and the label.
SoftmaxCrossEntropyResult softmax_cross_entropy_forward(const ComputeContext& ctx,
                                                        const float* logits,
                                                        const std::int32_t* labels,
                                                        std::size_t rows, std::size_t classes,
                                                        float* row_loss, std::int32_t* row_correct);
// The same loss without a host round trip: adds the rows' loss sum, correct
// count and bad-label count to totals[0..2] (kernels::kLossTotalsCount
// doubles on ctx's device). On the CPU a bad label is an Error at once; on a
// GPU it is counted, for the reader of the totals to report.
void softmax_cross_entropy_accumulate(const ComputeContext& ctx, const float* logits,
                                      const std::int32_t* labels, std::size_t rows,
                                      std::size_t classes, float* row_loss,
                                      std::int32_t* row_correct, double* totals,
                                      float smoothing = 0.0f);
// dlogits = scale * (softmax(logits) - target), target the one-hot label or,
// with label smoothing e, (1 - e) onehot + e / classes; for the gradient of
// grad_scale * mean loss, scale = grad_scale / rows.
void softmax_cross_entropy_backward(const ComputeContext& ctx, const float* logits,
                                    const std::int32_t* labels, std::size_t rows,
                                    std::size_t classes, float scale, float* dlogits,
                                    float smoothing = 0.0f);

}  // namespace ringtrain
