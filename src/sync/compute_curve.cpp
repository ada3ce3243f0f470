// See compute_curve.h: compute per step against the per-rank batch.
#include "ringtrain/sync/compute_curve.h"

#include <algorithm>

#include "ringtrain/core/check.h"

namespace ringtrain {

ComputeCurve::ComputeCurve(std::vector<ComputePoint> points) : points_(std::move(points)) {
  RT_CHECK(!points_.empty(), "compute curve: no measured batch");
  for (const ComputePoint& p : points_)
    RT_CHECK(p.batch > 0 && p.step_s > 0,
             "compute curve: batch {} took {} s per step; both must be positive", p.batch,
             p.step_s);
  std::sort(points_.begin(), points_.end(),
            [](const ComputePoint& a, const ComputePoint& b) { return a.batch < b.batch; });
  for (std::size_t i = 1; i < points_.size(); ++i)
    RT_CHECK(points_[i].batch != points_[i - 1].batch, "compute curve: batch {} is measured twice",
             points_[i].batch);
}

double ComputeCurve::step_s_at(double batch) const {
  RT_CHECK(batch > 0, "compute curve: batch {} is not positive", batch);
  const ComputePoint& lo = points_.front();
  const ComputePoint& hi = points_.back();
  if (points_.size() == 1) return lo.step_s * batch / lo.batch;
  auto line = [](const ComputePoint& a, const ComputePoint& b, double x) {
    return a.step_s + (b.step_s - a.step_s) * (x - a.batch) / (b.batch - a.batch);
  };
  if (batch <= lo.batch) return std::max(line(lo, points_[1], batch), lo.step_s * batch / lo.batch);
  if (batch >= hi.batch) return std::max(line(points_[points_.size() - 2], hi, batch), hi.step_s);
  const auto upper = std::lower_bound(points_.begin(), points_.end(), batch,
                                      [](const ComputePoint& p, double x) { return p.batch < x; });
  return line(*(upper - 1), *upper, batch);
}

}  // namespace ringtrain
