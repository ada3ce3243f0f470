// See step_predictor.h: the overlap timeline of one predicted step.
#include "ringtrain/perf/step_predictor.h"

#include <algorithm>
#include <limits>
#include <vector>

#include "ringtrain/core/check.h"

namespace ringtrain {

namespace {
// What the last rank's lateness adds after the last all-reduce: with a
// measured lag it is already in the timeline (every all-reduce starts that
// late); tiers without one add the wait measured at the end of compute.
double end_of_step_wait(const ClusterShape& shape, AllreduceAlgorithm algorithm,
                        const LinkTiers& links) {
  return allreduce_arrival_lag(shape, algorithm, links) > 0
             ? 0.0
             : allreduce_arrival_wait(shape, algorithm, links);
}
}  // namespace

double StepProfile::total_bytes() const {
  double total = 0;
  for (const BucketProfile& b : buckets) total += b.bytes;
  return total;
}

StepPrediction predict_step(const StepProfile& profile, const ClusterShape& shape,
                            AllreduceAlgorithm algorithm, const LinkTiers& links,
                            double compute_scale, double comm_cpu_share) {
  RT_CHECK(compute_scale > 0, "compute scale must be positive, got {}", compute_scale);
  RT_CHECK(comm_cpu_share >= 0 && comm_cpu_share <= 1,
           "communication cpu share must be within [0, 1], got {}", comm_cpu_share);
  StepPrediction p;
  const double backward_end = profile.backward_s * compute_scale;
  // Ranks that share cores are apart: the last reaches each bucket this late.
  const double lag = allreduce_arrival_lag(shape, algorithm, links);
  double comm_free = 0;  // when the communication thread is next idle
  for (const BucketProfile& b : profile.buckets) {
    const double t = allreduce_seconds(b.bytes, shape, algorithm, links);
    const double start = std::max(b.ready_s * compute_scale + lag, comm_free);
    comm_free = start + t;
    p.comm_s += t;
  }
  p.exposed_s = std::max(0.0, comm_free - backward_end) + end_of_step_wait(shape, algorithm, links);
  p.compute_s =
      (profile.before_backward_s + profile.backward_s + profile.optimizer_s) * compute_scale;
  // The overlapped part of the all-reduces competes with backward for its core.
  p.contention_s = comm_cpu_share * (p.comm_s - p.exposed_s);
  p.step_s = p.compute_s + p.exposed_s + p.contention_s;
  return p;
}

StepPrediction predict_step_shared_core(const StepProfile& profile, const ClusterShape& shape,
                                        AllreduceAlgorithm algorithm, const LinkTiers& links,
                                        double compute_scale) {
  RT_CHECK(compute_scale > 0, "compute scale must be positive, got {}", compute_scale);
  const UnderLoadLinks loaded = under_load_links(shape, algorithm, links);
  RT_CHECK(loaded.complete,
           "the comm model has no under-load fit for a tier this shape uses ({} node(s) x {} "
           "rank(s), {}): measure it with 'ringtrain bench model --under-load'",
           shape.nodes, shape.ranks_per_node, allreduce_algorithm_name(algorithm));
  const double loss = std::clamp(loaded.compute_loss, 0.0, 0.95);
  StepPrediction p;
  const double work = profile.backward_s * compute_scale;  // backward alone
  struct Transfer {
    double ready_work, alone_s, loaded_s;
  };
  std::vector<Transfer> transfers;
  // Ranks that share cores are apart: the last reaches each bucket this late,
  // and a bucket's all-reduce starts only then.
  const double lag = allreduce_arrival_lag(shape, algorithm, links);
  for (const BucketProfile& b : profile.buckets) {
    const double alone = allreduce_seconds(b.bytes, shape, algorithm, links);
    p.comm_s += alone;
    transfers.push_back({std::min(b.ready_s * compute_scale, work), alone,
                         allreduce_seconds(b.bytes, shape, algorithm, loaded.tiers)});
  }
  // Piecewise constant rates between events: a bucket becomes ready on the
  // mean rank, the last rank reaches it (lag later), an all-reduce ends,
  // backward ends on the mean rank, and on the last (lag later).
  double t = 0, done = 0, backward_end = work > 0 ? -1 : 0;
  double left = 1;  // fraction of the current all-reduce still to do
  std::size_t k = 0;
  std::vector<double> ready_at(transfers.size(), -1);  // when the mean rank produced it
  constexpr double kSlack = 1e-12;                     // seconds: float rounding of event times
  while (k < transfers.size() || done < work) {
    const bool backward_running = done < work;
    // A ring needs every rank: while the last rank still computes (lag after
    // the mean rank), an all-reduce proceeds at its time beside compute.
    // (3 ranks on 2 cores, the mlp's 1 MiB bucket: 2.3 ms in training traces
    // where its time alone is 1.8 ms, started before the last rank's backward
    // ended.)
    const bool last_computing = backward_running || t + kSlack < backward_end + lag;
    for (std::size_t j = k; j < transfers.size(); ++j)
      if (ready_at[j] < 0 && done >= transfers[j].ready_work) ready_at[j] = t;
    auto startable = [&](std::size_t j) {
      return ready_at[j] >= 0 && t + kSlack >= ready_at[j] + lag;
    };
    // An all-reduce of no time (one rank) ends at once when it can start.
    while (k < transfers.size() && startable(k) &&
           (last_computing ? transfers[k].loaded_s : transfers[k].alone_s) <= 0) {
      ++k;
      left = 1;
    }
    const bool comm_running = k < transfers.size() && startable(k);
    const bool comm_waiting = k < transfers.size() && !comm_running && ready_at[k] >= 0;
    if (!backward_running && !comm_running && !comm_waiting) break;
    const double work_rate = backward_running ? (comm_running ? 1 - loss : 1) : 0;
    const double comm_s =
        comm_running ? (last_computing ? transfers[k].loaded_s : transfers[k].alone_s) : 0;
    double dt = std::numeric_limits<double>::infinity();
    if (backward_running) dt = std::min(dt, (work - done) / work_rate);
    if (comm_running && !backward_running && last_computing)
      dt = std::min(dt, backward_end + lag - t);
    if (comm_running) dt = std::min(dt, left * comm_s);
    if (comm_waiting) dt = std::min(dt, std::max(0.0, ready_at[k] + lag - t));
    // The next bucket the mean rank produces: its time starts its lag.
    if (backward_running)
      for (std::size_t j = k; j < transfers.size(); ++j)
        if (ready_at[j] < 0) {
          dt = std::min(dt, (transfers[j].ready_work - done) / work_rate);
          break;
        }
    t += dt;
    done = backward_running ? std::min(work, done + work_rate * dt) : done;
    if (comm_running) {
      left -= dt / comm_s;
      if (left <= 1e-12) {
        ++k;
        left = 1;
      }
    }
    if (backward_running && done >= work) backward_end = t;
  }
  if (backward_end < 0) backward_end = t;
  p.exposed_s = std::max(0.0, t - backward_end) + end_of_step_wait(shape, algorithm, links);
  p.compute_s =
      (profile.before_backward_s + profile.backward_s + profile.optimizer_s) * compute_scale;
  p.contention_s = backward_end - work;
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
