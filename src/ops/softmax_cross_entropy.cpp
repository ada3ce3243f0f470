#include "ringtrain/ops/softmax_cross_entropy.h"

#include <vector>

#include "kernels/softmax_cross_entropy.cuh"
#include "ops/gpu_ops.h"
#include "ringtrain/core/check.h"
#include "ringtrain/data/token_data.h"
#include "ringtrain/ops/precision.h"

namespace ringtrain {

static_assert(kernels::kIgnoredLabel == kIgnoreLabel);

namespace {
void check_label(std::int32_t label, std::size_t row, std::size_t classes) {
  RT_CHECK(label == kIgnoreLabel || (label >= 0 && static_cast<std::size_t>(label) < classes),
           "label {} of batch row {} is outside [0, {}): the labels do not match the model's {} "
           "classes",
           label, row, classes, classes);
}
// The logits (or their gradient): rows of classes, stride apart, of a
// storage dtype. A gradient's padding is written too (zeros), so it holds
// whole rows.
void check_logits(const BufferView& v, std::size_t rows, std::size_t classes, std::size_t stride,
                  bool written = false) {
  RT_CHECK(is_compute_precision(v.dtype),
           "softmax cross-entropy: the logits are {}, not a storage dtype (f32, bf16, f16)",
           dtype_name(v.dtype));
  RT_CHECK(stride >= classes,
           "softmax cross-entropy: a row stride of {} is narrower than the {} classes", stride,
           classes);
  RT_CHECK(rows == 0 || v.count >= (rows - 1) * stride + (written ? stride : classes),
           "softmax cross-entropy: {} {} for {} rows of {} classes {} apart", v.count,
           written ? "gradient values" : "logits", rows, classes, stride);
}
// Row i's second label under `mix`, or -1 (no mix: the plain loss).
int second_label(const LabelMix& mix, std::size_t i) {
  return mix.active() ? mix.second[i] : -1;
}
}  // namespace

SoftmaxCrossEntropyResult softmax_cross_entropy_forward(
    const ComputeContext& ctx, BufferView logits, const std::int32_t* labels, std::size_t rows,
    std::size_t classes, std::size_t stride, float* row_loss, std::int32_t* row_correct) {
  SoftmaxCrossEntropyResult r;
  if (rows == 0) return r;
  check_logits(logits, rows, classes, stride);
  const int c = static_cast<int>(classes);
  if (ctx.is_cuda()) {
    RT_CHECK(row_loss != nullptr && row_correct != nullptr,
             "softmax cross-entropy on a GPU needs per-row workspaces");
    detail::gpu_softmax_ce_forward(ctx.stream(), logits, labels, rows, classes, stride, row_loss,
                                   row_correct);
    // The loss is a host number: one small copy of `rows` entries per step.
    thread_local std::vector<float> host_loss;
    thread_local std::vector<std::int32_t> host_correct;
    host_loss.resize(rows);
    host_correct.resize(rows);
    detail::gpu_copy_to_host(host_loss.data(), row_loss, rows * sizeof(float), ctx.stream());
    detail::gpu_copy_to_host(host_correct.data(), row_correct, rows * sizeof(std::int32_t),
                             ctx.stream());
    for (std::size_t i = 0; i < rows; ++i) {
      if (host_correct[i] == kernels::kIgnoredRow) continue;
      if (host_correct[i] < 0) {
        std::int32_t label = 0;
        detail::gpu_copy_to_host(&label, labels + i, sizeof(label), ctx.stream());
        check_label(label, i, classes);
      }
      r.loss_sum += host_loss[i];
      r.correct += static_cast<std::size_t>(host_correct[i]);
      ++r.counted;
    }
    return r;
  }
  kernels::with_storage(logits.dtype, [&](auto t) {
    using T = decltype(t);
    const T* z = static_cast<const T*>(logits.ptr);
    for (std::size_t i = 0; i < rows; ++i) {
      check_label(labels[i], i, classes);
      float loss = 0.0f;
      int correct = 0;
      kernels::softmax_ce_row_forward(z + i * stride, c, labels[i], &loss, &correct);
      if (correct == kernels::kIgnoredRow) continue;
      r.loss_sum += loss;
      r.correct += static_cast<std::size_t>(correct);
      ++r.counted;
    }
  });
  return r;
}

void softmax_cross_entropy_accumulate(const ComputeContext& ctx, BufferView logits,
                                      const std::int32_t* labels, std::size_t rows,
                                      std::size_t classes, std::size_t stride, float* row_loss,
                                      std::int32_t* row_correct, double* totals, float smoothing,
                                      const LabelMix& mix) {
  if (rows == 0) return;
  check_logits(logits, rows, classes, stride);
  if (ctx.is_cuda()) {
    detail::gpu_softmax_ce_forward(ctx.stream(), logits, labels, rows, classes, stride, row_loss,
                                   row_correct, smoothing, mix.second, mix.lam);
    detail::gpu_loss_totals_add(ctx.stream(), row_loss, row_correct, rows, totals);
    return;
  }
  kernels::with_storage(logits.dtype, [&](auto t) {
    using T = decltype(t);
    const T* z = static_cast<const T*>(logits.ptr);
    for (std::size_t i = 0; i < rows; ++i) {
      check_label(labels[i], i, classes);
      if (mix.active()) check_label(mix.second[i], i, classes);
      float loss = 0.0f;
      int correct = 0;
      kernels::softmax_ce_row_forward(z + i * stride, static_cast<int>(classes), labels[i], &loss,
                                      &correct, smoothing, second_label(mix, i), mix.lam);
      kernels::loss_totals_add_row(loss, correct, totals);
    }
  });
}

void softmax_cross_entropy_backward(const ComputeContext& ctx, BufferView logits,
                                    const std::int32_t* labels, std::size_t rows,
                                    std::size_t classes, std::size_t stride, float scale,
                                    BufferView dlogits, float smoothing, const LabelMix& mix) {
  check_logits(logits, rows, classes, stride);
  check_logits(dlogits, rows, classes, stride, /*written=*/true);
  RT_CHECK(dlogits.ptr != logits.ptr || dlogits.dtype == logits.dtype,
           "softmax cross-entropy: a {} gradient written over {} logits", dtype_name(dlogits.dtype),
           dtype_name(logits.dtype));
  if (ctx.is_cuda())
    return detail::gpu_softmax_ce_backward(ctx.stream(), logits, labels, rows, classes, stride,
                                           scale, dlogits, smoothing, mix.second, mix.lam);
  kernels::with_storage_pair(logits.dtype, dlogits.dtype, [&](auto t, auto g) {
    using T = decltype(t);
    using G = decltype(g);
    const T* z = static_cast<const T*>(logits.ptr);
    G* dz = static_cast<G*>(dlogits.ptr);
    for (std::size_t i = 0; i < rows; ++i) {
      check_label(labels[i], i, classes);
      if (mix.active()) check_label(mix.second[i], i, classes);
      kernels::softmax_ce_row_backward(z + i * stride, static_cast<int>(classes), labels[i], scale,
                                       dz + i * stride, smoothing, second_label(mix, i), mix.lam);
      kernels::softmax_ce_row_zero_padding(dz + i * stride, static_cast<int>(classes),
                                           static_cast<int>(stride));
    }
  });
}

void softmax_cross_entropy_accumulate_backward(const ComputeContext& ctx, BufferView logits,
                                               const std::int32_t* labels, std::size_t rows,
                                               std::size_t classes, std::size_t stride,
                                               float* row_loss, std::int32_t* row_correct,
                                               double* totals, float scale, BufferView dlogits,
                                               float smoothing, const LabelMix& mix) {
  if (rows == 0) return;
  check_logits(logits, rows, classes, stride);
  check_logits(dlogits, rows, classes, stride, /*written=*/true);
  RT_CHECK(dlogits.ptr != logits.ptr || dlogits.dtype == logits.dtype,
           "softmax cross-entropy: a {} gradient written over {} logits", dtype_name(dlogits.dtype),
           dtype_name(logits.dtype));
  if (ctx.is_cuda()) {
    detail::gpu_softmax_ce_forward_backward(ctx.stream(), logits, labels, rows, classes, stride,
                                            scale, dlogits, row_loss, row_correct, smoothing,
                                            mix.second, mix.lam);
    detail::gpu_loss_totals_add(ctx.stream(), row_loss, row_correct, rows, totals);
    return;
  }
  kernels::with_storage_pair(logits.dtype, dlogits.dtype, [&](auto t, auto g) {
    using T = decltype(t);
    using G = decltype(g);
    const T* z = static_cast<const T*>(logits.ptr);
    G* dz = static_cast<G*>(dlogits.ptr);
    for (std::size_t i = 0; i < rows; ++i) {
      check_label(labels[i], i, classes);
      if (mix.active()) check_label(mix.second[i], i, classes);
      float loss = 0.0f;
      int correct = 0;
      kernels::softmax_ce_row_forward_backward(z + i * stride, static_cast<int>(classes), labels[i],
                                               scale, dz + i * stride, &loss, &correct, smoothing,
                                               second_label(mix, i), mix.lam);
      kernels::softmax_ce_row_zero_padding(dz + i * stride, static_cast<int>(classes),
                                           static_cast<int>(stride));
      kernels::loss_totals_add_row(loss, correct, totals);
    }
  });
}

}  // namespace ringtrain
