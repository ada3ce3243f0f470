// Host-side launchers for kernels/softmax_cross_entropy.cu. Streams travel as void*.
#pragma once

#include <cstddef>
#include <cstdint>

#include "ringtrain/core/dtype.h"

namespace ringtrain::kernels {

// Per row r: row_loss[r], row_correct[r] (see softmax_ce_row_forward).
// `second` (null: none) and `lam`: the mixed target of mixup / cutmix, row r's
// second label second[r] with weight 1 - lam. The logits and their gradient
// are of a storage dtype each (f32, bf16, f16), row r at r * stride
// (stride >= classes: a padded row, whose gradient's padding is written 0).
void softmax_ce_forward_cuda(const void* logits, DType logits_type, const std::int32_t* labels,
                             std::size_t rows, std::size_t classes, std::size_t stride,
                             float* row_loss, std::int32_t* row_correct, float smoothing,
                             const std::int32_t* second, float lam, void* stream);
void softmax_ce_backward_cuda(const void* logits, DType logits_type, const std::int32_t* labels,
                              std::size_t rows, std::size_t classes, std::size_t stride,
                              float scale, void* dlogits, DType dlogits_type, float smoothing,
                              const std::int32_t* second, float lam, void* stream);
// The fused classifier: softmax_ce_forward_cuda's row_loss and row_correct
// and softmax_ce_backward_cuda's gradient in one kernel (dlogits may be the
// logits): the same values as the two launches.
void softmax_ce_forward_backward_cuda(const void* logits, DType logits_type,
                                      const std::int32_t* labels, std::size_t rows,
                                      std::size_t classes, std::size_t stride, float scale,
                                      void* dlogits, DType dlogits_type, float* row_loss,
                                      std::int32_t* row_correct, float smoothing,
                                      const std::int32_t* second, float lam, void* stream);

// totals[0..2] += the rows' loss sum, correct count and bad-label count (one
// block, a fixed summation order: the same totals on every run).
void loss_totals_add_cuda(const float* row_loss, const std::int32_t* row_correct, std::size_t rows,
                          double* totals, void* stream);

}  // namespace ringtrain::kernels
