// A rank's compute time per training step against its batch, measured at a
// few batches ('ringtrain bench step'). Strong scaling shrinks the per-rank
// batch as ranks are added, and a small batch uses the cores less well (fixed
// costs per layer and per call, smaller matrix products), so compute does not
// fall in proportion to the batch: the cnn here took 62.7 ms at batch 48
// against 120.4 ms at 96, the mlp 11.5 ms at 96 against 19.5 ms at 192.
//
// A point may also say how many ranks computed at once on one machine
// ('bench step' under 'mpirun -np K', timed by its slowest rank): ranks that
// share a machine share its cores, caches and memory bandwidth, so one rank's
// compute is slower beside others (here: the cnn 1.6 times slower with 3 ranks
// on 2 cores, the mlp 1.14 times with 2 ranks on 2 cores).
#pragma once

#include <vector>

namespace ringtrain {

struct ComputePoint {
  double batch = 0;   // samples per rank per step
  double step_s = 0;  // forward + backward + optimizer of one step (the slowest rank's)
  int colocated = 1;  // ranks that computed at once on the machine
  // Beside others, when timed side by side with one rank alone in the same
  // seconds ('bench step --side-by-side'): the slowdown, which then replaces
  // step_s over the curve alone (taken from two runs apart, that ratio is
  // mostly the machine's drift between them). 0: not measured so.
  double slowdown = 0;
};

class ComputeCurve {
 public:
  // Throws Error for no points, a batch or time that is not positive, a
  // co-located count under 1, or a batch measured twice at the same count.
  explicit ComputeCurve(std::vector<ComputePoint> points);

  // One rank alone: linear between the measured batches. Outside them, the
  // line through the two nearest points (a fixed cost per step plus a cost per
  // sample), but never cheaper per step than in proportion to the batch below
  // the range, nor cheaper than the largest measured step above it; one point
  // alone is scaled in proportion.
  // Beside others: at the measured co-located count nearest to `colocated`
  // from below (the smallest measured one if none is below), the curve alone
  // times the slowdown measured at that count (a point's side-by-side slowdown
  // where it has one, else its step over the curve alone; linear in the batch
  // between its measured batches, the nearest one's outside); with no point
  // alone, that count's own points as above.
  double step_s_at(double batch, int colocated = 1) const;

  // The measured co-located count that step_s_at uses for `colocated`.
  int measured_colocated(int colocated) const;

  // By co-located count, then batch, ascending.
  const std::vector<ComputePoint>& points() const { return points_; }

 private:
  std::vector<ComputePoint> points_at(int colocated) const;
  std::vector<ComputePoint> points_;
};

}  // namespace ringtrain
