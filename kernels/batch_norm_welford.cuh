// BatchNorm's training statistics in one pass over x (kernels/batch_norm.cu),
// and the arithmetic the CPU twin of that pass (src/ops/batch_norm_one_pass.h)
// runs with the same functions, so CPU tests check the GPU's numbers.
//
// Each thread keeps Welford partials (count, mean, M2) of the elements it
// reads, in fp32, of x minus a per-channel shift (the channel's first element,
// which every block can read: with data far from zero, mean 1000 and std
// 0.01, an unshifted fp32 running mean stops moving once d / n falls below
// half its ulp, and M2 then measures the distance to a stale mean). The
// partials are merged with Chan's formula in a fixed order: a block's threads
// in a fixed tree or sequence, then the blocks' (row slices') partials in slice
// order. No float atomics and no order that depends on scheduling: the result
// is a function of the shape alone, bit for bit, run to run.
//
// The split of the work is the bias gradient's (kernels/bias.cuh,
// bias_grad_split), with three floats per partial in the scratch:
//  - inner == 1 (NHWC, features): block (tile of kBiasTileChannels channels,
//    slice); thread (x, y) reads rows begin + y, begin + y + kBiasTileRows, ...
//    of channel tile * kBiasTileChannels + x; then row 0 of threads merges the
//    kBiasTileRows partials in order y = 1, 2, ...
//  - inner > 1 (NCHW): block (channel, slice) of kBiasPlaneThreads threads;
//    thread t reads the slice's elements t, t + kBiasPlaneThreads, ... in
//    memory order; then a tree: for s = kBiasPlaneThreads / 2, ..., 1,
//    partial[t] = merge(partial[t], partial[t + s]) for t < s.
//  - slices: merge(merge(merge(empty, slice 0), slice 1), ...).
//
// Every product, quotient and sum is rounded on its own
// (kernels/rounded_arithmetic.cuh): nvcc would otherwise fuse a product into
// the add after it (FMA) and the CPU, built without FMA, would not.
#pragma once

#include <cstddef>

#include "kernels/bias.cuh"
#include "kernels/host_device.cuh"
#include "kernels/rounded_arithmetic.cuh"

namespace ringtrain::kernels {

// Partials of one thread, block or slice. count is exact up to 2^24 elements.
// No default member initialisers: the kernels keep these in shared memory.
struct Welford {
  float count;
  float mean;  // of the shifted values
  float m2;    // sum of squared deviations from `mean`
};

// Floats per partial in the scratch: count, mean, m2.
constexpr std::size_t kWelfordFloats = 3;

// One element x (fp32, from any storage type), shifted by the channel's
// shift, into a partial's mean and m2 whose count has just become `count`,
// given as its reciprocal (welford_reciprocal): a kernel that takes several
// channels of a row keeps one count for them and divides once per row, not
// once per element. A division is a dozen instructions on a GPU, in the
// chain each element's mean waits on; the product by the rounded reciprocal
// rounds once more than the quotient (a relative 2^-24 of the step), which
// no statistic here notices.
RT_HD float welford_reciprocal(float count) {
  return div_rn(1.0f, count);
}
RT_HD void welford_update_moments(float reciprocal, float x, float shift, float& mean, float& m2) {
  const float v = sub_rn(x, shift);
  const float d = sub_rn(v, mean);
  mean = add_rn(mean, mul_rn(d, reciprocal));
  m2 = add_rn(m2, mul_rn(d, sub_rn(v, mean)));
}
RT_HD void welford_update(Welford& w, float x, float shift) {
  w.count = add_rn(w.count, 1.0f);
  welford_update_moments(welford_reciprocal(w.count), x, shift, w.mean, w.m2);
}

// Chan et al.'s merge of two partials of the same channel (same shift), in
// two parts: what depends on the two counts alone (a WelfordMergeStep: the
// same for every channel of a slice, so the kernel that merges the slices'
// partials makes it once per slice, keeping the divisions out of each
// channel's chain of merges), then the merge by it. An empty side returns the
// other exactly, so merging empty partials (threads with no element) changes
// nothing.
struct WelfordMergeStep {
  float count;      // the merged count
  float b_share;    // b.count / count
  float m2_weight;  // a.count * b.count / count
  int kind;         // 0: b is empty (a stays), 1: a is empty (b is taken), 2: merged
};
RT_HD float welford_merged_count(float a_count, float b_count) {
  if (b_count == 0.0f) return a_count;
  if (a_count == 0.0f) return b_count;
  return add_rn(a_count, b_count);
}
RT_HD WelfordMergeStep welford_merge_step(float a_count, float b_count) {
  if (b_count == 0.0f) return {a_count, 0.0f, 0.0f, 0};
  if (a_count == 0.0f) return {b_count, 0.0f, 0.0f, 1};
  const float n = add_rn(a_count, b_count);
  return {n, div_rn(b_count, n), div_rn(mul_rn(a_count, b_count), n), 2};
}
RT_HD Welford welford_merge_by(const Welford& a, const Welford& b, const WelfordMergeStep& step) {
  if (step.kind == 0) return a;
  if (step.kind == 1) return b;
  const float d = sub_rn(b.mean, a.mean);
  const float mean = add_rn(a.mean, mul_rn(d, step.b_share));
  const float m2 = add_rn(add_rn(a.m2, b.m2), mul_rn(mul_rn(d, d), step.m2_weight));
  return {step.count, mean, m2};
}
RT_HD Welford welford_merge(const Welford& a, const Welford& b) {
  return welford_merge_by(a, b, welford_merge_step(a.count, b.count));
}

// The channel's mean from its merged partials: the shift added back.
RT_HD float welford_mean(const Welford& w, float shift) {
  return add_rn(shift, w.mean);
}

// --sync-bn, with sum all-reduces only. All-reduce 1 sums, per channel,
// welford_weighted_mean(n_r, mean_r) and n_r over the ranks r; then the global
// mean is welford_global_mean(that sum, n); each rank's welford_rank_m2 is
// its M2 plus its count times its mean's squared distance to the global mean,
// and all-reduce 2 sums those into the global M2 (Chan's formula, as sums).
RT_HD float welford_weighted_mean(float count, float mean) {
  return mul_rn(count, mean);
}
RT_HD float welford_global_mean(float weighted_sum, float count) {
  return div_rn(weighted_sum, count);
}
RT_HD float welford_rank_m2(float m2, float count, float rank_mean, float global_mean) {
  const float d = sub_rn(rank_mean, global_mean);
  return add_rn(m2, mul_rn(count, mul_rn(d, d)));
}

// How the one pass splits [outer, channels, inner] (see above); the scratch
// holds slices * kWelfordFloats * channels floats: partial k of (slice,
// channel c) at [(slice * kWelfordFloats + k) * channels + c].
inline BiasGradSplit welford_split(std::size_t outer, std::size_t channels, std::size_t inner,
                                   std::size_t scratch_floats) {
  return bias_grad_split(outer, channels, inner, scratch_floats / kWelfordFloats);
}

}  // namespace ringtrain::kernels
