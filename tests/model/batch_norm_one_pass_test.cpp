// The GPU's one-pass BatchNorm statistics (Welford partials merged in a fixed
// order, kernels/batch_norm_welford.cuh), run on the CPU by their twin
// (ops/batch_norm_one_pass.h), which takes the GPU's partition and merge
// order and its functions: against float64 two-pass statistics of the same
// stored values, on hard data (mean 1000 and std 0.01 in fp32; bf16 and fp16
// storage; element counts that are no multiple of a block's; one element per
// channel; many slices and one), and repeatable bit for bit. The --sync-bn
// steps (two sum all-reduces) are checked the same way over ranks that hold
// uneven parts of a batch.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "kernels/batch_norm.cuh"
#include "kernels/batch_norm_welford.cuh"
#include "kernels/storage.cuh"
#include "ops/batch_norm_one_pass.h"
#include "ops/gpu_ops.h"
#include "tests/model/batch_norm_data.h"

using namespace ringtrain;
using namespace ringtrain::test;

namespace {

struct Stats {
  std::vector<float> mean, m2;
  float count = 0;
};
Stats twin(const Batch& b, std::size_t scratch_floats) {
  Stats s;
  s.mean.assign(b.c, -1.0f);
  s.m2.assign(b.c, -1.0f);
  detail::one_pass_statistics_twin(b.data(), b.t, b.n, b.c, b.hw, scratch_floats, s.mean.data(),
                                   s.m2.data(), &s.count);
  return s;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// The twin within tolerance of float64: the mean within mean_tol of the
// channel's spread plus one fp32 rounding of the mean, the variance within
// var_rel of it (plus a floor for a zero variance).
void require_close(const Stats& got, const Reference& want, double mean_tol, double var_rel) {
  REQUIRE(got.count == static_cast<float>(want.count));
  for (std::size_t ch = 0; ch < want.mean.size(); ++ch) {
    INFO("channel " << ch << ": mean " << got.mean[ch] << " vs " << want.mean[ch] << ", m2 "
                    << got.m2[ch] << " vs " << want.m2[ch]);
    const double var = want.m2[ch] / want.count;
    const double spread = std::sqrt(var);
    CHECK(std::fabs(got.mean[ch] - want.mean[ch]) <=
          mean_tol * spread + 0x1.0p-24 * std::fabs(want.mean[ch]));
    const double got_var = static_cast<double>(got.m2[ch]) / want.count;
    CHECK(std::fabs(got_var - var) <= var_rel * var + 1e-30);
  }
}

struct Case {
  const char* name;
  std::size_t n, c, hw;
};

}  // namespace

TEST_CASE("one-pass statistics: mean 1000, std 0.01 in fp32", "[batch_norm][one_pass]") {
  const Case cases[] = {
      {"nchw, several slices, 14700 per channel", 300, 3, 49},
      {"nchw, one channel of 802816 (64 slices)", 64, 1, 112 * 112},
      {"rows (nhwc), 37 channels, 1000 rows", 1000, 37, 1},
      {"rows, 2 channels, 100000 rows", 100000, 2, 1},
      {"nchw, one row", 1, 4, 1000},
      {"nchw, a plane wider than a block (inner 300)", 20, 2, 300},
      {"one element per channel, nchw", 1, 5, 1},
      {"one element per channel, many", 1, 70, 1},
      {"odd rows (nhwc), 33 channels, 257 rows", 257, 33, 1},
  };
  const std::vector<double> means = {1000.0, -1000.0, 999.5, 1000.25};
  const std::size_t scratch = GENERATE(std::size_t{0}, detail::kGpuScratchFloats);
  for (const Case& k : cases) {
    INFO(k.name << ", scratch " << scratch);
    const Batch b = make_batch(DType::f32, k.n, k.c, k.hw, means, 0.01, 11);
    const Stats got = twin(b, scratch);
    // The fp32 grid at 1000 is 6.1e-5 (0.6% of the std): one rounding of the
    // mean is all the mean may be off; M2 within 1e-5 relative (measured
    // 1.1e-6; without the shift, up to 3e-3).
    require_close(got, reference(b, 0, b.n), 1e-3, 1e-5);
    const Stats again = twin(b, scratch);
    CHECK(same_bits(got.mean, again.mean));
    CHECK(same_bits(got.m2, again.m2));
  }
}

TEST_CASE("one-pass statistics: ordinary data and 16-bit storage", "[batch_norm][one_pass]") {
  const DType t = GENERATE(DType::f32, DType::bf16, DType::f16);
  const std::size_t scratch = GENERATE(std::size_t{0}, detail::kGpuScratchFloats);
  const Case cases[] = {
      {"nchw", 300, 3, 49},       {"nchw 7x9", 3, 5, 63},
      {"rows", 1000, 37, 1},      {"one element per channel", 1, 6, 1},
      {"wide plane", 9, 2, 1000},
  };
  // bf16 near 50 is on a 0.25 grid, fp16 near 300 on a 0.25 grid: the data
  // keep several grid steps per std.
  const std::vector<double> means = t == DType::bf16  ? std::vector<double>{50.0, -20.0, 3.0}
                                    : t == DType::f16 ? std::vector<double>{300.0, -40.0, 1.5}
                                                      : std::vector<double>{0.5, -2.0, 10.0};
  const double stddev = t == DType::f32 ? 1.0 : 2.0;
  for (const Case& k : cases) {
    INFO(dtype_name(t) << " " << k.name << ", scratch " << scratch);
    const Batch b = make_batch(t, k.n, k.c, k.hw, means, stddev, 12);
    const Stats got = twin(b, scratch);
    require_close(got, reference(b, 0, b.n), 1e-5, 1e-5);
    const Stats again = twin(b, scratch);
    CHECK(same_bits(got.mean, again.mean));
    CHECK(same_bits(got.m2, again.m2));
  }
}

TEST_CASE("one-pass statistics: the twin's invstd is finalize's", "[batch_norm][one_pass]") {
  // What the GPU writes to saved.invstd: bn_invstd(m2 / count, eps).
  const Batch b = make_batch(DType::f32, 40, 3, 25, {1.0, 2.0, -3.0}, 0.5, 13);
  const Stats got = twin(b, detail::kGpuScratchFloats);
  const Reference want = reference(b, 0, b.n);
  for (std::size_t ch = 0; ch < b.c; ++ch) {
    const float invstd = kernels::bn_invstd(got.m2[ch] / got.count, 1e-5f);
    const double exact = 1.0 / std::sqrt(want.m2[ch] / want.count + 1e-5);
    CHECK(std::fabs(invstd - exact) <= 1e-6 * exact);
  }
}

TEST_CASE("one-pass statistics over ranks (--sync-bn's two sum all-reduces)",
          "[batch_norm][one_pass][sync_bn]") {
  // Ranks hold uneven parts of one batch (rows); each runs the one pass, then
  // the sums of count * mean and count, the global mean, each rank's M2 term
  // and their sum, as kernels/batch_norm.cu's welford_rank_kernel and the
  // all-reduces do (sums over the ranks in rank order here).
  const bool hard = GENERATE(false, true);
  const bool nchw = GENERATE(false, true);
  const std::size_t c = 5, hw = nchw ? 30 : 1;
  const std::vector<std::size_t> rows =
      nchw ? std::vector<std::size_t>{7, 1, 12, 3} : std::vector<std::size_t>{700, 1, 1200, 65};
  std::size_t n = 0;
  for (std::size_t r : rows) n += r;
  const std::vector<double> means =
      hard ? std::vector<double>{1000.0, -1000.0, 999.75} : std::vector<double>{0.5, -3.0, 7.0};
  const Batch whole = make_batch(DType::f32, n, c, hw, means, hard ? 0.01 : 1.0, 14);
  INFO((hard ? "mean 1000 std 0.01" : "ordinary") << (nchw ? " nchw" : " rows"));

  std::vector<Stats> ranks;
  std::size_t row = 0;
  for (std::size_t r : rows) {
    Batch part = whole;
    part.n = r;
    const std::size_t begin = row * c * hw, end = (row + r) * c * hw;
    part.f32.assign(whole.f32.begin() + static_cast<std::ptrdiff_t>(begin),
                    whole.f32.begin() + static_cast<std::ptrdiff_t>(end));
    ranks.push_back(twin(part, detail::kGpuScratchFloats));
    row += r;
  }
  std::vector<float> sum_nm(c, 0.0f), global(c), m2(c, 0.0f);
  float count = 0;
  for (const Stats& s : ranks) {
    for (std::size_t ch = 0; ch < c; ++ch)
      sum_nm[ch] += kernels::welford_weighted_mean(s.count, s.mean[ch]);
    count += s.count;
  }
  for (std::size_t ch = 0; ch < c; ++ch)
    global[ch] = kernels::welford_global_mean(sum_nm[ch], count);
  for (const Stats& s : ranks)
    for (std::size_t ch = 0; ch < c; ++ch)
      m2[ch] += kernels::welford_rank_m2(s.m2[ch], s.count, s.mean[ch], global[ch]);

  Stats got;
  got.mean = global;
  got.m2 = m2;
  got.count = count;
  // The global mean is a quotient of fp32 sums of count * mean: a few of its
  // ulps (at 1000, 6.1e-5, 0.6% of the std), which M2 sees squared.
  require_close(got, reference(whole, 0, n), hard ? 2e-2 : 1e-5, hard ? 1e-3 : 1e-5);
}

TEST_CASE("one-pass statistics: Welford's update and Chan's merge", "[batch_norm][one_pass]") {
  using kernels::Welford;
  // Merging with an empty partial returns the other side exactly.
  Welford a{0.0f, 0.0f, 0.0f};
  for (float x : {3.0f, 5.0f, 4.0f}) kernels::welford_update(a, x, 0.0f);
  CHECK(a.count == 3.0f);
  CHECK(a.mean == 4.0f);
  CHECK(a.m2 == 2.0f);
  const Welford empty{0.0f, 0.0f, 0.0f};
  const Welford l = kernels::welford_merge(a, empty), r = kernels::welford_merge(empty, a);
  CHECK((l.count == a.count && l.mean == a.mean && l.m2 == a.m2));
  CHECK((r.count == a.count && r.mean == a.mean && r.m2 == a.m2));
  // {3, 5, 4} + {10, 12}: mean 34 / 5, M2 = sum of squared deviations.
  Welford b{0.0f, 0.0f, 0.0f};
  kernels::welford_update(b, 10.0f, 0.0f);
  kernels::welford_update(b, 12.0f, 0.0f);
  const Welford m = kernels::welford_merge(a, b);
  CHECK(m.count == 5.0f);
  CHECK(m.mean == Approx(6.8).epsilon(1e-6));
  // Deviations -3.8, -1.8, -2.8, 3.2, 5.2: M2 = 2 + 2 + 7^2 * 3 * 2 / 5 = 62.8.
  CHECK(m.m2 == Approx(62.8).epsilon(1e-6));
  // The shift drops out of the mean: the same values shifted by their first.
  Welford s{0.0f, 0.0f, 0.0f};
  for (float x : {3.0f, 5.0f, 4.0f}) kernels::welford_update(s, x, 3.0f);
  CHECK(kernels::welford_mean(s, 3.0f) == 4.0f);
  CHECK(s.m2 == 2.0f);
}

TEST_CASE(
    "one-pass statistics: the slices' merge by steps made once per slice is one thread's "
    "merges, bit for bit",
    "[batch_norm][one_pass]") {
  using kernels::Welford;
  // Chan's merge as written before it was split into a step and the merge
  // by it: the split must not move a bit.
  const auto chan = [](const Welford& a, const Welford& b) {
    if (b.count == 0.0f) return a;
    if (a.count == 0.0f) return b;
    const float n = a.count + b.count;
    const float d = b.mean - a.mean;
    return Welford{n, a.mean + d * (b.count / n),
                   (a.m2 + b.m2) + (d * d) * ((a.count * b.count) / n)};
  };
  // The slices' partials of 5 channels as the statistics kernels leave them:
  // every channel of a slice has the slice's count (37 rows; a short last
  // slice of 11; trailing empty slices), means and M2 that differ.
  const std::size_t channels = 5, slices = 150;
  std::vector<Welford> part(slices * channels);
  for (std::size_t s = 0; s < slices; ++s)
    for (std::size_t c = 0; c < channels; ++c) {
      const float count = s < 146 ? 37.0f : s == 146 ? 11.0f : 0.0f;
      const float u = static_cast<float>((s * 7919 + c * 104729) % 1000) / 1000.0f;
      part[s * channels + c] =
          count == 0.0f ? Welford{0.0f, 0.0f, 0.0f} : Welford{count, u - 0.5f, count * (0.25f + u)};
    }
  // welford_slices_kernel's order: per chunk of 64 slices, the counts merged
  // before each slice (additions alone), a step per slice, then each
  // channel's merges by the steps.
  std::vector<Welford> by_steps(channels, Welford{0.0f, 0.0f, 0.0f});
  float merged = 0.0f;
  for (std::size_t s0 = 0; s0 < slices; s0 += 64) {
    const std::size_t n = std::min<std::size_t>(64, slices - s0);
    std::vector<kernels::WelfordMergeStep> steps;
    for (std::size_t j = 0; j < n; ++j) {
      const float count = part[(s0 + j) * channels].count;
      steps.push_back(kernels::welford_merge_step(merged, count));
      merged = kernels::welford_merged_count(merged, count);
    }
    for (std::size_t c = 0; c < channels; ++c)
      for (std::size_t j = 0; j < n; ++j)
        by_steps[c] =
            kernels::welford_merge_by(by_steps[c], part[(s0 + j) * channels + c], steps[j]);
  }
  for (std::size_t c = 0; c < channels; ++c) {
    Welford one{0.0f, 0.0f, 0.0f}, old{0.0f, 0.0f, 0.0f};
    for (std::size_t s = 0; s < slices; ++s) {
      one = kernels::welford_merge(one, part[s * channels + c]);
      old = chan(old, part[s * channels + c]);
    }
    CAPTURE(c);
    CHECK(std::memcmp(&one, &old, sizeof(Welford)) == 0);
    CHECK(std::memcmp(&one, &by_steps[c], sizeof(Welford)) == 0);
    CHECK(one.count == 146.0f * 37.0f + 11.0f);
  }
}
