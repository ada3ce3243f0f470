// Predicted training step time from a measured step profile and the all-reduce
// tiers (allreduce_time.h). Overlap is modelled as the trainer does it: bucket k's
// all-reduce starts when backward has produced it and the previous bucket's
// all-reduce is done (one communication thread, buckets in order); the
// optimizer waits for the last one. The exposed part is what backward did not
// hide: max(0, last all-reduce end - backward end). Where ranks share cores
// they do not move in step: the last is behind the ranks' mean by the measured
// lag (LinkParams::arrival_lag_s), so each bucket's all-reduce starts that
// long after the mean rank produced it (the last bucket's too: the lag is
// exposed at the end). A fit from before the lag was measured adds the wait
// for the last rank (LinkParams::arrival_wait_s) to the exposed time instead.
// When the communication has no core of its own (comm_cpu_share > 0: the rank's
// communication thread and its compute share a core), the overlap hides only
// part of an all-reduce: the CPU the all-reduce needs while backward runs
// (its cpu share of the overlapped time) is taken from backward, so
//   step = compute + exposed + share * (comm - exposed).
// share 1 is no overlap at all (step = compute + comm), share 0 free overlap.
// Assumptions: compute per rank is what the profile measured (weak scaling),
// or scales with the per-rank batch (strong scaling, compute_scale); the
// network has no congestion; gradients within a bucket are produced evenly in
// time (only for rebucketing).
#pragma once

#include <cstddef>
#include <vector>

#include "ringtrain/perf/allreduce_time.h"

namespace ringtrain {

struct BucketProfile {
  double bytes = 0;    // payload of the bucket's all-reduce
  double ready_s = 0;  // seconds after backward started when backward produced it
};

struct StepProfile {
  double before_backward_s = 0;  // data wait + forward
  double backward_s = 0;
  double optimizer_s = 0;
  std::vector<BucketProfile> buckets;  // in the order backward completes them
  double total_bytes() const;
};

struct StepPrediction {
  double step_s = 0;        // compute + exposed
  double compute_s = 0;     // before backward + backward + optimizer
  double comm_s = 0;        // sum of the all-reduce times
  double exposed_s = 0;     // all-reduce time after backward ended
  double contention_s = 0;  // compute lost to overlapped all-reduces on a shared core
  double exposed_share() const { return step_s > 0 ? exposed_s / step_s : 0; }
};

// compute_scale multiplies every compute time (and the ready times): 1 for weak
// scaling, per-rank batch / profiled per-rank batch for strong scaling.
// comm_cpu_share in [0, 1]: 0 when the communication has a core of its own.
StepPrediction predict_step(const StepProfile& profile, const ClusterShape& shape,
                            AllreduceAlgorithm algorithm, const LinkTiers& links,
                            double compute_scale = 1.0, double comm_cpu_share = 0.0);

// The step where communication shares the core it computes on, with both
// sides measured (allreduce_time.h, under_load_links): while backward runs, an
// all-reduce proceeds at its under-load time and backward at (1 - compute_loss)
// of its rate; after backward, the all-reduce proceeds at its time alone, once
// the last rank's backward has ended too (the arrival lag after the mean
// rank's: a ring needs every rank, and the last one's core still computes). Bucket
// k is ready when backward has done the work that the profile had done by its
// ready time. contention_s is how much longer backward took than alone.
StepPrediction predict_step_shared_core(const StepProfile& profile, const ClusterShape& shape,
                                        AllreduceAlgorithm algorithm, const LinkTiers& links,
                                        double compute_scale = 1.0);

// The same gradient stream cut into buckets of at most cap_bytes, with ready
// times interpolated within the measured buckets (gradients assumed produced
// evenly in time between two ready times). cap_bytes <= 0: one bucket.
StepProfile rebucket(const StepProfile& profile, double cap_bytes);

}  // namespace ringtrain
