// See compute_curve.h: compute per step against the per-rank batch, and the
// number of ranks computing at once on the machine.
#include "ringtrain/perf/compute_curve.h"

#include <algorithm>
#include <string>

#include <fmt/format.h>

#include "ringtrain/core/check.h"

namespace ringtrain {

ComputeCurve::ComputeCurve(std::vector<ComputePoint> points) : points_(std::move(points)) {
  RT_CHECK(!points_.empty(), "compute curve: no measured batch");
  for (const ComputePoint& p : points_) {
    RT_CHECK(p.batch > 0 && p.step_s > 0,
             "compute curve: batch {} took {} s per step; both must be positive", p.batch,
             p.step_s);
    RT_CHECK(p.colocated >= 1, "compute curve: batch {} measured with {} co-located ranks", p.batch,
             p.colocated);
    RT_CHECK(p.slowdown >= 0, "compute curve: batch {} has a negative slowdown beside others ({})",
             p.batch, p.slowdown);
  }
  std::sort(points_.begin(), points_.end(), [](const ComputePoint& a, const ComputePoint& b) {
    return a.colocated != b.colocated ? a.colocated < b.colocated : a.batch < b.batch;
  });
  for (std::size_t i = 1; i < points_.size(); ++i)
    RT_CHECK(points_[i].batch != points_[i - 1].batch ||
                 points_[i].colocated != points_[i - 1].colocated,
             "compute curve: batch {} is measured twice{}", points_[i].batch,
             points_[i].colocated > 1
                 ? fmt::format(" with {} co-located ranks", points_[i].colocated)
                 : std::string());
}

int ComputeCurve::measured_colocated(int colocated) const {
  int best = points_.front().colocated;
  for (const ComputePoint& p : points_)
    if (p.colocated <= colocated) best = p.colocated;
  return best;
}

namespace {
// Linear between the measured batches of one count; outside them, the line
// through the two nearest, held to the proportion below the range and to the
// largest step above it; one point alone in proportion.
double along(const std::vector<ComputePoint>& at, double batch) {
  const ComputePoint& lo = at.front();
  const ComputePoint& hi = at.back();
  if (at.size() == 1) return lo.step_s * batch / lo.batch;
  auto line = [](const ComputePoint& a, const ComputePoint& b, double x) {
    return a.step_s + (b.step_s - a.step_s) * (x - a.batch) / (b.batch - a.batch);
  };
  if (batch <= lo.batch) return std::max(line(lo, at[1], batch), lo.step_s * batch / lo.batch);
  if (batch >= hi.batch) return std::max(line(at[at.size() - 2], hi, batch), hi.step_s);
  const auto upper = std::lower_bound(at.begin(), at.end(), batch,
                                      [](const ComputePoint& p, double x) { return p.batch < x; });
  return line(*(upper - 1), *upper, batch);
}
}  // namespace

std::vector<ComputePoint> ComputeCurve::points_at(int colocated) const {
  std::vector<ComputePoint> at;
  for (const ComputePoint& p : points_)
    if (p.colocated == colocated) at.push_back(p);
  return at;
}

double ComputeCurve::step_s_at(double batch, int colocated) const {
  RT_CHECK(batch > 0, "compute curve: batch {} is not positive", batch);
  const int k = measured_colocated(colocated);
  const std::vector<ComputePoint> at = points_at(k);
  RT_CHECK(!at.empty(), "compute curve: no point with {} co-located ranks", k);
  const std::vector<ComputePoint> alone = points_at(1);
  if (k == 1 || alone.empty()) return along(at, batch);
  // Beside others: the slowdown measured at this count's batches (linear
  // between them, the nearest one's outside), applied to the curve alone,
  // which has more batches to say how compute depends on the batch.
  std::vector<ComputePoint> ratio;
  for (const ComputePoint& p : at)
    ratio.push_back({p.batch, p.slowdown > 0 ? p.slowdown : p.step_s / along(alone, p.batch), k});
  double r = ratio.front().step_s;
  if (batch >= ratio.back().batch) {
    r = ratio.back().step_s;
  } else if (batch > ratio.front().batch) {
    const auto upper =
        std::lower_bound(ratio.begin(), ratio.end(), batch,
                         [](const ComputePoint& p, double x) { return p.batch < x; });
    const ComputePoint& a = *(upper - 1);
    const ComputePoint& b = *upper;
    r = a.step_s + (b.step_s - a.step_s) * (batch - a.batch) / (b.batch - a.batch);
  }
  return along(alone, batch) * r;
}

}  // namespace ringtrain
