// See step_model.h: the overlap timeline of one predicted step.
#include "ringtrain/sync/step_model.h"

#include <algorithm>

#include "ringtrain/core/check.h"

namespace ringtrain {

double StepProfile::total_bytes() const {
  double total = 0;
  for (const BucketProfile& b : buckets) total += b.bytes;
  return total;
}

StepPrediction predict_step(const StepProfile& profile, const ClusterShape& shape,
                            AllreduceAlgorithm algorithm, const CommModel& model,
                            double compute_scale, double comm_cpu_share) {
  RT_CHECK(compute_scale > 0, "compute scale must be positive, got {}", compute_scale);
  RT_CHECK(comm_cpu_share >= 0 && comm_cpu_share <= 1,
           "communication cpu share must be within [0, 1], got {}", comm_cpu_share);
  StepPrediction p;
  const double backward_end = profile.backward_s * compute_scale;
  double comm_free = 0;  // when the communication thread is next idle
  for (const BucketProfile& b : profile.buckets) {
    const double t = allreduce_seconds(b.bytes, shape, algorithm, model);
    const double start = std::max(b.ready_s * compute_scale, comm_free);
    comm_free = start + t;
    p.comm_s += t;
  }
  p.exposed_s = std::max(0.0, comm_free - backward_end);
  p.compute_s =
      (profile.before_backward_s + profile.backward_s + profile.optimizer_s) * compute_scale;
  // The overlapped part of the all-reduces competes with backward for its core.
  p.contention_s = comm_cpu_share * (p.comm_s - p.exposed_s);
  p.step_s = p.compute_s + p.exposed_s + p.contention_s;
  return p;
}

StepProfile rebucket(const StepProfile& profile, double cap_bytes) {
  StepProfile out = profile;
  out.buckets.clear();
  const double total = profile.total_bytes();
  if (profile.buckets.empty() || total <= 0) return out;
  if (cap_bytes <= 0 || cap_bytes >= total) {
    out.buckets.push_back({total, profile.buckets.back().ready_s});
    return out;
  }
  // Cumulative bytes against time: piecewise linear through (ready_k, sum of
  // bytes up to k), starting at (0, 0).
  double produced = 0, t0 = 0, next_cut = cap_bytes;
  for (const BucketProfile& b : profile.buckets) {
    const double end_bytes = produced + b.bytes;
    while (next_cut < end_bytes - 1e-9) {
      const double frac = b.bytes > 0 ? (next_cut - produced) / b.bytes : 1.0;
      out.buckets.push_back({cap_bytes, t0 + frac * (b.ready_s - t0)});
      next_cut += cap_bytes;
    }
    produced = end_bytes;
    t0 = b.ready_s;
  }
  const double rest = total - cap_bytes * static_cast<double>(out.buckets.size());
  if (rest > 1e-9) out.buckets.push_back({rest, profile.buckets.back().ready_s});
  return out;
}

}  // namespace ringtrain
