// See comm_model.h: the alpha-beta fit, the measured step curve and the
// all-reduce time formulas.
#include "ringtrain/sync/comm_model.h"

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

AllreduceAlgorithm parse_allreduce_algorithm(const std::string& name) {
  if (name == "ring") return AllreduceAlgorithm::ring;
  if (name == "hierarchical") return AllreduceAlgorithm::hierarchical;
  throw Error(fmt::format("all-reduce algorithm '{}' is not one of: ring, hierarchical", name));
}

const char* allreduce_algorithm_name(AllreduceAlgorithm algorithm) {
  return algorithm == AllreduceAlgorithm::ring ? "ring" : "hierarchical";
}

namespace {
double ring_seconds(double bytes, int ranks, const LinkParams& link) {
  if (ranks <= 1) return 0;
  return 2.0 * (ranks - 1) *
         ring_step_seconds(bytes / ranks, link.alpha_s, link.beta_s_per_byte, link.step_curve);
}
}  // namespace

double allreduce_seconds(double bytes, const ClusterShape& shape, AllreduceAlgorithm algorithm,
                         const CommModel& model) {
  RT_CHECK(shape.nodes >= 1 && shape.ranks_per_node >= 1,
           "cluster shape {} node(s) x {} rank(s) is not a job", shape.nodes, shape.ranks_per_node);
  const int g = shape.ranks_per_node, n = shape.nodes;
  if (algorithm == AllreduceAlgorithm::ring)
    return ring_seconds(bytes, g * n, n > 1 ? model.inter : model.intra);
  // Reduce-scatter plus all-gather inside the node is one ring all-reduce's
  // worth of steps; each rank then owns n/G bytes to all-reduce across nodes.
  return ring_seconds(bytes, g, model.intra) + ring_seconds(bytes / g, n, model.inter);
}

namespace {
// A per-tier measure of the tiers an all-reduce of this shape uses: inter
// across nodes, intra inside one, the larger of both for a hierarchical one
// that uses both. One rank uses none: 0.
double of_tiers_used(const ClusterShape& shape, AllreduceAlgorithm algorithm,
                     const CommModel& model, double LinkParams::*measure) {
  if (shape.world() <= 1) return 0;
  if (shape.nodes == 1) return model.intra.*measure;
  if (algorithm == AllreduceAlgorithm::hierarchical && shape.ranks_per_node > 1)
    return std::max(model.intra.*measure, model.inter.*measure);
  return model.inter.*measure;
}
}  // namespace

double allreduce_cpu_share(const ClusterShape& shape, AllreduceAlgorithm algorithm,
                           const CommModel& model) {
  return of_tiers_used(shape, algorithm, model, &LinkParams::cpu_share);
}

double allreduce_arrival_wait(const ClusterShape& shape, AllreduceAlgorithm algorithm,
                              const CommModel& model) {
  return of_tiers_used(shape, algorithm, model, &LinkParams::arrival_wait_s);
}

double allreduce_arrival_lag(const ClusterShape& shape, AllreduceAlgorithm algorithm,
                             const CommModel& model) {
  return of_tiers_used(shape, algorithm, model, &LinkParams::arrival_lag_s);
}

UnderLoadModel under_load_model(const ClusterShape& shape, AllreduceAlgorithm algorithm,
                                const CommModel& model) {
  UnderLoadModel u;
  u.model = model;
  auto load = [](LinkParams& p) {
    p.alpha_s = p.loaded_alpha_s;
    p.beta_s_per_byte = p.loaded_beta_s_per_byte;
    p.step_curve = p.loaded_step_curve;
  };
  load(u.model.intra);
  load(u.model.inter);
  if (shape.world() <= 1) {
    u.complete = true;
    return u;
  }
  const bool uses_intra = shape.nodes == 1 || (algorithm == AllreduceAlgorithm::hierarchical &&
                                               shape.ranks_per_node > 1);
  const bool uses_inter = shape.nodes > 1;
  u.complete =
      (!uses_intra || model.intra.has_under_load) && (!uses_inter || model.inter.has_under_load);
  if (uses_intra) u.compute_loss = std::max(u.compute_loss, model.intra.compute_loss);
  if (uses_inter) u.compute_loss = std::max(u.compute_loss, model.inter.compute_loss);
  return u;
}

double suggest_bucket_bytes(const ClusterShape& shape, AllreduceAlgorithm algorithm,
                            const CommModel& model, double latency_share) {
  RT_CHECK(latency_share > 0, "latency share must be positive, got {}", latency_share);
  // The fits alone: linear in bytes, so the transfer part per byte is the slope.
  CommModel fits = model;
  fits.intra.step_curve.clear();
  fits.inter.step_curve.clear();
  const double latency = allreduce_seconds(0, shape, algorithm, fits);
  const double per_byte = allreduce_seconds(1.0, shape, algorithm, fits) - latency;
  if (per_byte <= 0 || latency <= 0) return 0;
  return latency / (latency_share * per_byte);
}

}  // namespace ringtrain
