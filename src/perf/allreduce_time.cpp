// See allreduce_time.h: the all-reduce time formulas over two link tiers.
#include "ringtrain/perf/allreduce_time.h"

#include <algorithm>

#include <fmt/format.h>

#include "ringtrain/core/check.h"
#include "ringtrain/core/error.h"

namespace ringtrain {

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
                         const LinkTiers& links) {
  RT_CHECK(shape.nodes >= 1 && shape.ranks_per_node >= 1,
           "cluster shape {} node(s) x {} rank(s) is not a job", shape.nodes, shape.ranks_per_node);
  const int g = shape.ranks_per_node, n = shape.nodes;
  if (algorithm == AllreduceAlgorithm::ring)
    return ring_seconds(bytes, g * n, n > 1 ? links.inter : links.intra);
  // Reduce-scatter plus all-gather inside the node is one ring all-reduce's
  // worth of steps; each rank then owns n/G bytes to all-reduce across nodes.
  return ring_seconds(bytes, g, links.intra) + ring_seconds(bytes / g, n, links.inter);
}

namespace {
// A per-tier measure of the tiers an all-reduce of this shape uses: inter
// across nodes, intra inside one, the larger of both for a hierarchical one
// that uses both. One rank uses none: 0.
double of_tiers_used(const ClusterShape& shape, AllreduceAlgorithm algorithm,
                     const LinkTiers& links, double LinkParams::*measure) {
  if (shape.world() <= 1) return 0;
  if (shape.nodes == 1) return links.intra.*measure;
  if (algorithm == AllreduceAlgorithm::hierarchical && shape.ranks_per_node > 1)
    return std::max(links.intra.*measure, links.inter.*measure);
  return links.inter.*measure;
}
}  // namespace

double allreduce_cpu_share(const ClusterShape& shape, AllreduceAlgorithm algorithm,
                           const LinkTiers& links) {
  return of_tiers_used(shape, algorithm, links, &LinkParams::cpu_share);
}

double allreduce_arrival_wait(const ClusterShape& shape, AllreduceAlgorithm algorithm,
                              const LinkTiers& links) {
  return of_tiers_used(shape, algorithm, links, &LinkParams::arrival_wait_s);
}

double allreduce_arrival_lag(const ClusterShape& shape, AllreduceAlgorithm algorithm,
                             const LinkTiers& links) {
  return of_tiers_used(shape, algorithm, links, &LinkParams::arrival_lag_s);
}

UnderLoadLinks under_load_links(const ClusterShape& shape, AllreduceAlgorithm algorithm,
                                const LinkTiers& links) {
  UnderLoadLinks u;
  u.tiers = links;
  auto load = [](LinkParams& p) {
    p.alpha_s = p.loaded_alpha_s;
    p.beta_s_per_byte = p.loaded_beta_s_per_byte;
    p.step_curve = p.loaded_step_curve;
  };
  load(u.tiers.intra);
  load(u.tiers.inter);
  if (shape.world() <= 1) {
    u.complete = true;
    return u;
  }
  const bool uses_intra = shape.nodes == 1 || (algorithm == AllreduceAlgorithm::hierarchical &&
                                               shape.ranks_per_node > 1);
  const bool uses_inter = shape.nodes > 1;
  u.complete =
      (!uses_intra || links.intra.has_under_load) && (!uses_inter || links.inter.has_under_load);
  if (uses_intra) u.compute_loss = std::max(u.compute_loss, links.intra.compute_loss);
  if (uses_inter) u.compute_loss = std::max(u.compute_loss, links.inter.compute_loss);
  return u;
}

double suggest_bucket_bytes(const ClusterShape& shape, AllreduceAlgorithm algorithm,
                            const LinkTiers& links, double latency_share) {
  RT_CHECK(latency_share > 0, "latency share must be positive, got {}", latency_share);
  // The fits alone: linear in bytes, so the transfer part per byte is the slope.
  LinkTiers fits = links;
  fits.intra.step_curve.clear();
  fits.inter.step_curve.clear();
  const double latency = allreduce_seconds(0, shape, algorithm, fits);
  const double per_byte = allreduce_seconds(1.0, shape, algorithm, fits) - latency;
  if (per_byte <= 0 || latency <= 0) return 0;
  return latency / (latency_share * per_byte);
}

}  // namespace ringtrain
