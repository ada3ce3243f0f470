// ops/wgrad_spot_check.h on the CPU: the trial pattern's values
// (kernels/trial_pattern.cuh, which the GPU's fill computes too), the spots'
// double-precision sums against the full reference, and the check's verdicts:
// right results in each dtype and order pass, results from the wrong
// elements, a missing image, the other order or a NaN fail.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <set>
#include <string>
#include <vector>

#include "kernels/reduce.cuh"
#include "kernels/trial_pattern.cuh"
#include "ops/wgrad_spot_check.h"
#include "tests/model/wgrad_reference.h"

using namespace ringtrain;
using detail::ConvGraphShape;

namespace {

ConvGraphShape shape(std::size_t n, std::size_t c, std::size_t h, std::size_t w, std::size_t k,
                     std::size_t r, std::size_t s, std::size_t pad, std::size_t stride, bool nhwc) {
  ConvGraphShape g;
  g.n = n, g.c = c, g.h = h, g.w = w, g.k = k, g.r = r, g.s = s;
  g.pad_h = g.pad_w = pad;
  g.stride_h = g.stride_w = stride;
  g.p = (h + 2 * pad - r) / stride + 1;
  g.q = (w + 2 * pad - s) / stride + 1;
  g.nhwc = nhwc;
  g.dtype = DType::bf16;
  return g;
}

std::vector<float> pattern(std::size_t count, std::uint32_t seed) {
  std::vector<float> v(count);
  for (std::size_t i = 0; i < count; ++i) v[i] = kernels::trial_pattern_value(i, seed);
  return v;
}

// The full weight gradient of the pattern's operands, in double.
test::WgradReference reference(const ConvGraphShape& s, bool kcrs) {
  return test::wgrad_reference(s, pattern(s.n * s.c * s.h * s.w, detail::kTrialSeedX),
                               pattern(s.n * s.k * s.p * s.q, detail::kTrialSeedDy), kcrs);
}

std::vector<float> as_floats(const std::vector<double>& v) {
  return std::vector<float>(v.begin(), v.end());
}

std::vector<std::uint16_t> as_16bit(const std::vector<double>& v, DType t) {
  std::vector<std::uint16_t> out(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) {
    const auto f = static_cast<float>(v[i]);
    out[i] = t == DType::bf16 ? kernels::float_to_bf16(f) : kernels::float_to_half(f);
  }
  return out;
}

}  // namespace

TEST_CASE("trial pattern: exact 16-bit values of zero mean", "[wgrad_spot]") {
  std::set<float> seen;
  double sum = 0;
  constexpr std::size_t kCount = 200000;
  for (std::size_t i = 0; i < kCount; ++i) {
    const float v = kernels::trial_pattern_value(i, 7);
    CHECK(std::abs(v) <= 0.25f);
    CHECK(v * 64.0f == std::round(v * 64.0f));
    CHECK(kernels::bf16_to_float(kernels::float_to_bf16(v)) == v);
    CHECK(kernels::half_to_float(kernels::float_to_half(v)) == v);
    seen.insert(v);
    sum += v;
  }
  CHECK(seen.size() == 33);
  CHECK(std::abs(sum / kCount) < 2e-3);
  // Seeds and the index's high half give other values.
  std::size_t same_seed = 0, same_high = 0;
  for (std::size_t i = 0; i < 1000; ++i) {
    same_seed += kernels::trial_pattern_value(i, 1) == kernels::trial_pattern_value(i, 2);
    same_high += kernels::trial_pattern_value(i, 1) ==
                 kernels::trial_pattern_value(i + (std::uint64_t{1} << 32), 1);
  }
  CHECK(same_seed < 100);
  CHECK(same_high < 100);
}

TEST_CASE("weight-gradient spots: the full reference's entries", "[wgrad_spot]") {
  for (const ConvGraphShape& s :
       {shape(3, 5, 7, 6, 4, 3, 3, 1, 1, true), shape(2, 3, 9, 9, 6, 7, 7, 3, 2, true),
        shape(2, 4, 6, 6, 5, 3, 3, 1, 2, false), shape(4, 8, 5, 5, 8, 1, 1, 0, 1, true)}) {
    const auto ref = reference(s, true);
    const auto spots = detail::wgrad_spots(s, 16);
    REQUIRE(spots.size() == 16);
    std::set<std::size_t> taps;
    for (const auto& at : spots) {
      REQUIRE(at.k < s.k);
      REQUIRE(at.c < s.c);
      REQUIRE(at.r < s.r);
      REQUIRE(at.s < s.s);
      taps.insert(at.r * s.s + at.s);
      const std::size_t i = ((at.k * s.c + at.c) * s.r + at.r) * s.s + at.s;
      CHECK(at.sum == Approx(ref.sum[i]).margin(1e-12));
    }
    // The first and last entries, and every tap (or 14 of the 7x7's 49, the first and last among
    // them).
    CHECK((spots[0].k == 0 && spots[0].c == 0 && spots[0].r == 0 && spots[0].s == 0));
    CHECK((spots[1].k == s.k - 1 && spots[1].c == s.c - 1 && spots[1].r == s.r - 1 &&
           spots[1].s == s.s - 1));
    CHECK(taps.size() == std::min<std::size_t>(s.r * s.s, 14));
  }
}

TEST_CASE("weight-gradient spots: right results pass, wrong ones fail", "[wgrad_spot]") {
  const ConvGraphShape s = shape(4, 6, 8, 8, 5, 3, 3, 1, 1, true);
  const auto spots = detail::wgrad_spots(s, 16);
  for (const bool kcrs : {true, false}) {
    const auto ref = reference(s, kcrs);
    const auto f32 = as_floats(ref.sum);
    CHECK(detail::wgrad_spot_disagreement(s, spots, f32.data(), DType::f32, kcrs).empty());
    for (const DType t : {DType::bf16, DType::f16}) {
      const auto narrow = as_16bit(ref.sum, t);
      CHECK(detail::wgrad_spot_disagreement(s, spots, narrow.data(), t, kcrs).empty());
    }
    // The other memory order's result.
    const auto other = as_floats(reference(s, !kcrs).sum);
    const std::string why =
        detail::wgrad_spot_disagreement(s, spots, other.data(), DType::f32, kcrs);
    CHECK(why.find("double-precision sums") != std::string::npos);
    CHECK(why.find(kcrs ? "KCRS" : "KRSC") != std::string::npos);
  }
  // Without the last image (a chunk left out).
  ConvGraphShape fewer = s;
  fewer.n = s.n - 1;
  const auto missing = as_floats(
      test::wgrad_reference(fewer, pattern(fewer.n * s.c * s.h * s.w, detail::kTrialSeedX),
                            pattern(fewer.n * s.k * s.p * s.q, detail::kTrialSeedDy), true)
          .sum);
  CHECK_FALSE(detail::wgrad_spot_disagreement(s, spots, missing.data(), DType::f32, true).empty());
  // Every tap one column further left (a wrong padding or row shift).
  ConvGraphShape moved_taps = s;
  moved_taps.pad_w = s.pad_w + 1;
  const auto moved = as_floats(
      test::wgrad_reference(moved_taps, pattern(s.n * s.c * s.h * s.w, detail::kTrialSeedX),
                            pattern(s.n * s.k * s.p * s.q, detail::kTrialSeedDy), true)
          .sum);
  CHECK_FALSE(detail::wgrad_spot_disagreement(s, spots, moved.data(), DType::f32, true).empty());
  // A NaN where a spot is.
  auto nan = as_floats(reference(s, true).sum);
  nan[0] = std::nanf("");
  CHECK(detail::wgrad_spot_disagreement(s, spots, nan.data(), DType::f32, true)
            .find("dW[k 0, c 0, r 0, s 0]") != std::string::npos);
}
