#include "ops/wgrad_spot_check.h"

#include <cmath>
#include <cstring>

#include <fmt/format.h>

#include "kernels/reduce.cuh"
#include "kernels/trial_pattern.cuh"

namespace ringtrain::detail {

namespace {

// Index of element (n, c, h, w) of an [N, C, H, W] tensor in memory.
std::size_t index_in(bool nhwc, std::size_t n, std::size_t c, std::size_t h, std::size_t w,
                     std::size_t C, std::size_t H, std::size_t W) {
  return nhwc ? ((n * H + h) * W + w) * C + c : ((n * C + c) * H + h) * W + w;
}

double spot_sum(const ConvGraphShape& s, const WgradSpot& at) {
  double sum = 0;
  for (std::size_t n = 0; n < s.n; ++n)
    for (std::size_t i = 0; i < s.p; ++i) {
      const long h = static_cast<long>(i * s.stride_h + at.r) - static_cast<long>(s.pad_h);
      if (h < 0 || h >= static_cast<long>(s.h)) continue;
      for (std::size_t j = 0; j < s.q; ++j) {
        const long w = static_cast<long>(j * s.stride_w + at.s) - static_cast<long>(s.pad_w);
        if (w < 0 || w >= static_cast<long>(s.w)) continue;
        const std::size_t xi = index_in(s.nhwc, n, at.c, static_cast<std::size_t>(h),
                                        static_cast<std::size_t>(w), s.c, s.h, s.w);
        const std::size_t di = index_in(s.nhwc, n, at.k, i, j, s.k, s.p, s.q);
        sum += static_cast<double>(kernels::trial_pattern_value(xi, kTrialSeedX)) *
               static_cast<double>(kernels::trial_pattern_value(di, kTrialSeedDy));
      }
    }
  return sum;
}

// A channel index from a spot's number: spread, not the first few.
std::size_t pick(std::size_t i, std::size_t salt, std::size_t range) {
  std::uint64_t h = (static_cast<std::uint64_t>(i) << 8 | salt) * 0x9E3779B97F4A7C15ull;
  h ^= h >> 29;
  return static_cast<std::size_t>(h % range);
}

float dw_at(const void* dw, DType t, std::size_t i) {
  if (t == DType::bf16 || t == DType::f16) {
    std::uint16_t bits;
    std::memcpy(&bits, static_cast<const char*>(dw) + 2 * i, sizeof bits);
    return t == DType::bf16 ? kernels::bf16_to_float(bits) : kernels::half_to_float(bits);
  }
  float v;
  std::memcpy(&v, static_cast<const char*>(dw) + 4 * i, sizeof v);
  return v;
}

// Half an ulp of dW's dtype, relative, doubled: one rounding of the result.
double rounding_of(DType t) {
  return t == DType::bf16 ? 0x1p-8 : t == DType::f16 ? 0x1p-11 : 0x1p-23;
}

}  // namespace

std::vector<WgradSpot> wgrad_spots(const ConvGraphShape& s, std::size_t count) {
  std::vector<WgradSpot> spots;
  if (s.k == 0 || s.c == 0 || s.r == 0 || s.s == 0) return spots;
  const std::size_t taps = s.r * s.s;
  for (std::size_t i = 0; i < count; ++i) {
    WgradSpot at;
    if (i == 1) {
      at = {s.k - 1, s.c - 1, s.r - 1, s.s - 1};
    } else if (i > 1) {
      // Every tap in turn, or, with more taps than spots, taps spread from
      // the first to the last.
      const std::size_t left = count - 2, j = i - 2;
      const std::size_t tap =
          taps <= left ? j % taps : (left > 1 ? j * (taps - 1) / (left - 1) : 0);
      at = {pick(i, 1, s.k), pick(i, 2, s.c), tap / s.s, tap % s.s};
    }
    at.sum = spot_sum(s, at);
    spots.push_back(at);
  }
  return spots;
}

std::string wgrad_spot_disagreement(const ConvGraphShape& s, std::span<const WgradSpot> spots,
                                    const void* dw, DType dw_dtype, bool kcrs) {
  if (spots.empty()) return "no entries to check it at";
  double square = 0;
  for (const WgradSpot& at : spots) square += at.sum * at.sum;
  const double rms = std::sqrt(square / static_cast<double>(spots.size()));
  for (const WgradSpot& at : spots) {
    const std::size_t i = kcrs ? ((at.k * s.c + at.c) * s.r + at.r) * s.s + at.s
                               : ((at.k * s.r + at.r) * s.s + at.s) * s.c + at.c;
    const double got = dw_at(dw, dw_dtype, i);
    const double tolerance = 1e-3 * rms + rounding_of(dw_dtype) * std::abs(at.sum);
    if (!(std::abs(got - at.sum) <= tolerance))
      return fmt::format(
          "dW[k {}, c {}, r {}, s {}] ({} {}) is {:.6g} where double-precision sums give {:.6g} "
          "(tolerance {:.3g})",
          at.k, at.c, at.r, at.s, dtype_name(dw_dtype), kcrs ? "KCRS" : "KRSC", got, at.sum,
          tolerance);
  }
  return {};
}

}  // namespace ringtrain::detail
