// A rank's compute time per training step against its batch, measured at a
// few batches ('ringtrain bench step'). Strong scaling shrinks the per-rank
// batch as ranks are added, and a small batch uses the cores less well (fixed
// costs per layer and per call, smaller matrix products), so compute does not
// fall in proportion to the batch: the cnn here took 62.7 ms at batch 48
// against 120.4 ms at 96, the mlp 11.5 ms at 96 against 19.5 ms at 192.
#pragma once

#include <vector>

namespace ringtrain {

struct ComputePoint {
  double batch = 0;   // samples per rank per step
  double step_s = 0;  // forward + backward + optimizer of one step
};

class ComputeCurve {
 public:
  // Throws Error for no points, a batch or time that is not positive, or a
  // batch measured twice.
  explicit ComputeCurve(std::vector<ComputePoint> points);

  // Linear between the measured batches. Outside them, the line through the
  // two nearest points (a fixed cost per step plus a cost per sample), but
  // never cheaper per step than in proportion to the batch below the range,
  // nor cheaper than the largest measured step above it; one point alone is
  // scaled in proportion.
  double step_s_at(double batch) const;

  const std::vector<ComputePoint>& points() const { return points_; }

 private:
  std::vector<ComputePoint> points_;  // by batch, ascending
};

}  // namespace ringtrain
