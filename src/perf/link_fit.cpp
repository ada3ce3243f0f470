// See link_fit.h: the alpha-beta fit and the measured step curve.
#include "ringtrain/perf/link_fit.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <utility>

#include <fmt/format.h>

#include "ringtrain/core/check.h"
#include "ringtrain/core/error.h"

namespace ringtrain {

LinkFit fit_ring_allreduce(const std::vector<TimingSample>& samples, int ranks, double poor_bound) {
  RT_CHECK(ranks >= 2, "an all-reduce fit needs at least 2 ranks, got {}", ranks);
  std::set<double> sizes;
  for (const TimingSample& s : samples) {
    RT_CHECK(s.bytes >= 0 && std::isfinite(s.bytes), "fit: sample size {} is not a byte count",
             s.bytes);
    RT_CHECK(s.seconds > 0 && std::isfinite(s.seconds),
             "fit: the time at {} bytes is {} s, not a positive time", s.bytes, s.seconds);
    sizes.insert(s.bytes);
  }
  RT_CHECK(sizes.size() >= 2, "fit: needs at least two distinct sizes, got {}", sizes.size());

  // Weighted least squares with weights 1/t^2: minimizes the relative error,
  // which is what a latency-dominated small message and a bandwidth-dominated
  // large one have in common.
  double sw = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (const TimingSample& s : samples) {
    const double w = 1.0 / (s.seconds * s.seconds);
    sw += w;
    sx += w * s.bytes;
    sy += w * s.seconds;
    sxx += w * s.bytes * s.bytes;
    sxy += w * s.bytes * s.seconds;
  }
  const double det = sw * sxx - sx * sx;
  RT_CHECK(det > 0, "fit: the sizes do not determine a line");
  LinkFit fit;
  fit.slope_s_per_byte = std::max(0.0, (sw * sxy - sx * sy) / det);
  fit.intercept_s = (sy - fit.slope_s_per_byte * sx) / sw;
  if (fit.intercept_s < 0) {
    // Refit the slope through the origin.
    fit.intercept_s = 0;
    fit.slope_s_per_byte = std::max(0.0, sxy / sxx);
  }
  const double steps = 2.0 * (ranks - 1);
  fit.link.alpha_s = fit.intercept_s / steps;
  fit.link.beta_s_per_byte = fit.slope_s_per_byte / (steps / ranks);
  for (const TimingSample& s : samples) {
    const double r = (s.seconds - (fit.intercept_s + fit.slope_s_per_byte * s.bytes)) / s.seconds;
    fit.residuals.push_back(r);
    fit.max_abs_residual = std::max(fit.max_abs_residual, std::abs(r));
  }
  fit.poor = fit.max_abs_residual > poor_bound;
  return fit;
}

std::vector<TimingSample> ring_step_curve(const std::vector<TimingSample>& samples, int ranks) {
  RT_CHECK(ranks >= 2, "a ring step curve needs at least 2 ranks, got {}", ranks);
  // Per size: the sum of times and how many.
  std::map<double, std::pair<double, int>> by_size;
  for (const TimingSample& s : samples) {
    RT_CHECK(s.bytes >= 0 && std::isfinite(s.bytes) && s.seconds > 0 && std::isfinite(s.seconds),
             "step curve: the sample ({} bytes, {} s) is not a size and a positive time", s.bytes,
             s.seconds);
    by_size[s.bytes].first += s.seconds;
    ++by_size[s.bytes].second;
  }
  const double steps = 2.0 * (ranks - 1);
  std::vector<TimingSample> curve;
  for (const auto& [bytes, sum] : by_size)
    curve.push_back({bytes / ranks, sum.first / sum.second / steps});
  return curve;
}

double ring_step_seconds(double chunk_bytes, double alpha_s, double beta_s_per_byte,
                         const std::vector<TimingSample>& step_curve) {
  if (step_curve.empty()) return alpha_s + chunk_bytes * beta_s_per_byte;
  const TimingSample &first = step_curve.front(), &last = step_curve.back();
  if (chunk_bytes <= first.bytes)
    return std::max(alpha_s, first.seconds - (first.bytes - chunk_bytes) * beta_s_per_byte);
  if (chunk_bytes >= last.bytes) return last.seconds + (chunk_bytes - last.bytes) * beta_s_per_byte;
  const auto hi =
      std::lower_bound(step_curve.begin(), step_curve.end(), chunk_bytes,
                       [](const TimingSample& s, double chunk) { return s.bytes < chunk; });
  const auto lo = hi - 1;
  const double f = (chunk_bytes - lo->bytes) / (hi->bytes - lo->bytes);
  return lo->seconds + f * (hi->seconds - lo->seconds);
}

}  // namespace ringtrain
