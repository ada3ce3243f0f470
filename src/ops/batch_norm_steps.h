// BatchNorm's statistics and backward sums as steps, on either device, shared
// by the plain form (src/ops/batch_norm.cpp) and the fused ones
// (src/ops/batch_norm_relu.cpp), so that both sum in the same order and give
// the same statistics and parameter gradients, bit for bit. On the CPU each
// channel's sums accumulate in double.
//
// On the CPU the statistics are two passes over x in double (the sums, then
// the squared deviations from the mean): exact enough that the order hardly
// matters, and they are the CPU reference bits (trainer_storage_reference,
// checkpoint hashes). On a GPU they are one pass (Welford partials in fp32
// merged in a fixed order: kernels/batch_norm_welford.cuh), whose CPU twin is
// src/ops/batch_norm_one_pass.h.
#pragma once

#include <cstddef>

#include "kernels/batch_norm.cuh"
#include "kernels/storage.cuh"
#include "ops/gpu_ops.h"
#include "ringtrain/ops/batch_norm.h"

namespace ringtrain::detail {

// Layout of BatchNormSaved::sums (2C + 1 floats): forward uses [0, C) for
// the sums (CPU: of x, then of the squared deviations; GPU with --sync-bn:
// of count * mean, then of the ranks' M2 terms) and [C] for the count summed
// over the ranks; backward uses [0, 2C) for sum(dy) and sum(dy xhat); [2C]
// keeps the batch's sample count.
inline float* count_slot(const BatchNormSaved& saved, std::size_t C) {
  return saved.sums + 2 * C;
}

// f(x widened to fp32, its index) over channel c's elements; x of a storage type.
template <typename T, typename PerElement>
void for_channel(const T* x, std::size_t batch, std::size_t C, std::size_t HW, std::size_t c,
                 PerElement&& f) {
  for (std::size_t n = 0; n < batch; ++n) {
    const std::size_t base = (n * C + c) * HW;
    for (std::size_t i = 0; i < HW; ++i) f(kernels::load(x, base + i), base + i);
  }
}

// Training mode: mean and invstd of the batch (over the ranks with `sync`),
// the running update when asked.
template <typename T>
void cpu_statistics(const BatchNormShape& s, const T* x, std::size_t batch, float eps,
                    float momentum, bool update_running, float* running_mean, float* running_var,
                    const BatchNormSaved& saved, BatchStatReducer* sync) {
  const std::size_t C = s.channels, HW = s.inner;
  float* sums = saved.sums;
  for (std::size_t c = 0; c < C; ++c) {
    double acc = 0;
    for_channel(x, batch, C, HW, c, [&](float v, std::size_t) { acc += v; });
    sums[c] = static_cast<float>(acc);
  }
  sums[C] = static_cast<float>(batch * HW);
  if (sync != nullptr) sync->sum(sums, C + 1);
  const float count = sums[C];
  *count_slot(saved, C) = count;
  for (std::size_t c = 0; c < C; ++c) saved.mean[c] = sums[c] / count;
  for (std::size_t c = 0; c < C; ++c) {
    double acc = 0;
    const double m = saved.mean[c];
    for_channel(x, batch, C, HW, c, [&](float v, std::size_t) { acc += (v - m) * (v - m); });
    sums[c] = static_cast<float>(acc);
  }
  if (sync != nullptr) sync->sum(sums, C);
  for (std::size_t c = 0; c < C; ++c) {
    const float var = sums[c] / count;
    saved.invstd[c] = kernels::bn_invstd(var, eps);
    if (update_running) {
      running_mean[c] = kernels::bn_running_mean(running_mean[c], saved.mean[c], momentum);
      running_var[c] = kernels::bn_running_var(running_var[c], var, count, momentum);
    }
  }
}

// Evaluation mode: the running statistics.
inline void cpu_eval_statistics(std::size_t C, float eps, const float* running_mean,
                                const float* running_var, const BatchNormSaved& saved) {
  for (std::size_t c = 0; c < C; ++c) {
    saved.mean[c] = running_mean[c];
    saved.invstd[c] = kernels::bn_invstd(running_var[c], eps);
  }
}

// Backward's sums: saved.sums[c] = sum(dy), [C + c] = sum(dy xhat) (over the
// ranks with `sync`), dgamma/dbeta (if not null) overwritten or added to from
// this rank's. dy_at(index, x, c) is dy at an element (whose x is x, of
// channel c), as fp32: the stored dy, or (fused with relu) dy masked by the
// output.
template <typename T, typename DyAt>
void cpu_backward_sums(const BatchNormShape& s, const T* x, std::size_t batch,
                       const BatchNormSaved& saved, float* dgamma, float* dbeta, bool accumulate,
                       BatchStatReducer* sync, DyAt&& dy_at) {
  const std::size_t C = s.channels, HW = s.inner;
  float* sums = saved.sums;
  for (std::size_t c = 0; c < C; ++c) {
    double sum_dy = 0, sum_dy_xhat = 0;
    const double m = saved.mean[c], is = saved.invstd[c];
    for_channel(x, batch, C, HW, c, [&](float v, std::size_t at) {
      const float g = dy_at(at, v, c);
      sum_dy += g;
      sum_dy_xhat += static_cast<double>(g) * (v - m) * is;
    });
    sums[c] = static_cast<float>(sum_dy);
    sums[C + c] = static_cast<float>(sum_dy_xhat);
    if (dgamma != nullptr) dgamma[c] = (accumulate ? dgamma[c] : 0.0f) + sums[C + c];
    if (dbeta != nullptr) dbeta[c] = (accumulate ? dbeta[c] : 0.0f) + sums[c];
  }
  if (sync != nullptr) sync->sum(sums, 2 * C);
}

// The statistics on a GPU, in the steps of kernels/batch_norm.h: training
// mode's or evaluation mode's (the running ones). Training reads x once: this
// rank's mean (saved.mean), M2 (in saved.invstd until the last step) and
// count (the count slot). With `sync`, all-reduce 1 sums count * mean and the
// count over the ranks (saved.sums[0, C]), each rank turns them into the
// global mean and its term of the global M2, and all-reduce 2 sums those.
inline void gpu_statistics(const ComputeContext& ctx, BufferView x, std::size_t batch,
                           std::size_t C, std::size_t HW, bool training, bool update_running,
                           float eps, float momentum, float* running_mean, float* running_var,
                           const BatchNormSaved& saved, BatchStatReducer* sync) {
  void* st = ctx.stream();
  if (!training) {
    gpu_batch_norm_eval_stats(st, running_mean, running_var, C, eps, saved.mean, saved.invstd);
    return;
  }
  float* count = count_slot(saved, C);
  float* m2 = saved.invstd;
  gpu_batch_norm_welford(handles_of(ctx), x, batch, C, HW, saved.mean, m2, count,
                         sync != nullptr ? saved.sums : nullptr);
  if (sync != nullptr) {
    sync->sum(saved.sums, C + 1);
    gpu_batch_norm_welford_ranks(st, saved.sums, C, static_cast<float>(batch * HW), saved.mean, m2,
                                 count);
    sync->sum(saved.sums, C);
    m2 = saved.sums;
  }
  gpu_batch_norm_finalize(st, m2, count, C, eps, momentum, update_running, saved.mean, saved.invstd,
                          running_mean, running_var);
}

}  // namespace ringtrain::detail
