// See scaling_prediction.h: the fits per node count, the refusal of poor ones,
// the CSV and the verdict.
#include "ringtrain/perf/scaling_prediction.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "ringtrain/core/check.h"
#include "ringtrain/core/error.h"
#include "ringtrain/data/output_guard.h"
#include "ringtrain/perf/compute_curve_file.h"
#include "ringtrain/perf/link_fit_file.h"
#include "ringtrain/perf/step_predictor.h"
#include "ringtrain/perf/trace_profile.h"

namespace ringtrain {
namespace {

struct Point {
  ClusterShape shape;
  AllreduceAlgorithm algorithm;
  StepPrediction p;
  double efficiency = 0;
};

}  // namespace

int run_scaling_prediction(const ScalingPredictionOptions& o) {
  const bool strong = o.scaling == "strong";
  const TraceProfile tp = profile_from_trace_file(o.trace, o.profile_rank, o.warmup_steps);
  RT_CHECK(!tp.profile.buckets.empty(),
           "trace {}: no all-reduce buckets recorded (was the run on one rank with no gradient "
           "sync?)",
           o.trace);
  const nlohmann::json doc = read_link_fit_file(o.link_fit_file);
  const std::vector<int>& nodes = o.nodes;
  // The fits for each predicted node count (the inter fit measured on the
  // nearest node count, where the file has several).
  std::map<int, LoadedLinkTiers> by_nodes;
  for (int n : nodes) {
    LoadedLinkTiers m;
    try {
      m = link_tiers_for(doc, o.backend, n);
    } catch (const nlohmann::json::exception& e) {
      throw Error(fmt::format("comm model {}: a field is missing or not a number ({})",
                              o.link_fit_file, e.what()));
    } catch (const Error& e) {
      throw Error(fmt::format("comm model {}: {}", o.link_fit_file, e.what()));
    }
    if (o.pricing == "fit")
      for (LinkParams* tier : {&m.tiers.intra, &m.tiers.inter}) {
        tier->step_curve.clear();
        tier->loaded_step_curve.clear();
      }
    by_nodes.emplace(n, std::move(m));
  }
  const LoadedLinkTiers& loaded = by_nodes.at(nodes.back());
  auto tiers_at = [&](const ClusterShape& shape) -> const LinkTiers& {
    return by_nodes.at(shape.nodes).tiers;
  };
  const bool need_inter = nodes.back() > 1, need_intra = o.ranks_per_node > 1;
  RT_CHECK(loaded.inter.have || !need_inter,
           "comm model {}: no across-nodes (inter) fit for backend {}, needed to predict {} "
           "nodes; run 'ringtrain bench model --json {}' with one rank per node",
           o.link_fit_file, o.backend, nodes.back(), o.link_fit_file);
  RT_CHECK(loaded.intra.have || !need_intra,
           "comm model {}: no inside-a-node (intra) fit for backend {}, needed for {} ranks per "
           "node; run 'ringtrain bench model --json {}' with ranks on one node",
           o.link_fit_file, o.backend, o.ranks_per_node, o.link_fit_file);
  // A poor fit is used only when asked for, and then said so.
  bool used_poor = false;
  auto check_poor = [&](bool needed, bool poor, const std::string& tier, double residual) {
    if (!needed || !poor) return;
    RT_CHECK(o.allow_poor,
             "comm model {}: the {} fit of backend {} is poor (largest residual {:.0f}% over the "
             "bound {:.0f}%), so it is not used; measure again on a quieter machine, or accept "
             "it with --allow-poor-fit",
             o.link_fit_file, tier, o.backend, 100 * residual, 100 * loaded.poor_bound);
    std::printf(
        "# warning: using the POOR %s fit of backend %s from %s (largest residual %.0f%%), "
        "as --allow-poor-fit asks\n",
        tier.c_str(), o.backend.c_str(), o.link_fit_file.c_str(), 100 * residual);
    used_poor = true;
  };
  // Without a core of its own (as many ranks as cores on a node), a rank's
  // communication shares the core it computes on.
  const bool shared_core = o.cores_per_node > 0 && o.ranks_per_node >= o.cores_per_node;
  check_poor(need_intra, loaded.intra.poor, "intra", loaded.intra.residual);
  if (shared_core && loaded.tiers.intra.has_under_load)
    check_poor(need_intra, loaded.intra.poor_under_load, "intra under-load",
               loaded.intra.residual_under_load);
  std::map<int, bool> inter_checked;  // by the node count the fit was measured on
  for (int n : nodes) {
    const LoadedLinkTiers& l = by_nodes.at(n);
    if (n < 2 || inter_checked[l.inter_nodes]) continue;
    inter_checked[l.inter_nodes] = true;
    const std::string tier =
        l.inter_nodes > 0 ? fmt::format("inter ({} nodes)", l.inter_nodes) : "inter";
    check_poor(true, l.inter.poor, tier, l.inter.residual);
    // The fit beside compute is used on a shared core.
    if (shared_core && l.tiers.inter.has_under_load)
      check_poor(true, l.inter.poor_under_load, tier + " under-load", l.inter.residual_under_load);
  }
  if (inter_checked.size() > 1) {
    std::string which;
    for (int n : nodes)
      if (n > 1)
        which += fmt::format("{}{} node(s) from the fit on {}", which.empty() ? "" : ", ", n,
                             by_nodes.at(n).inter_nodes);
    std::printf("# across nodes, fits measured on several node counts: %s\n", which.c_str());
  }
  const StepProfile& prof = tp.profile;
  // Strong scaling: the global batch is fixed, so the per-rank batch is
  // profile_ranks / W of the profiled one; compute scales in proportion, or
  // as the measured compute curve says. The curve also says how much slower a
  // rank computes beside the others that share its machine: ranks per node on
  // a cluster, every rank where all nodes are one machine (netns nodes).
  std::optional<LoadedComputeCurve> curve;
  if (!o.compute_curve.empty()) curve = read_compute_curve_file(o.compute_curve);
  const bool all_on_one_machine = o.colocation == "all";
  auto colocated_at = [&](int world) {
    return all_on_one_machine ? world : std::min(world, o.ranks_per_node);
  };
  const int profile_colocated =
      all_on_one_machine ? o.profile_ranks : std::min(o.profile_ranks, o.ranks_per_node);
  auto batch_at = [&](int world) {
    return strong ? o.profile_batch * o.profile_ranks / world : o.profile_batch;
  };
  auto scale_at = [&](int world) {
    if (!curve) return strong ? static_cast<double>(o.profile_ranks) / world : 1.0;
    return curve->curve.step_s_at(batch_at(world), colocated_at(world)) /
           curve->curve.step_s_at(o.profile_batch, profile_colocated);
  };
  // Without a measurement beside compute, a rank's communication takes its
  // measured CPU share from compute while it overlaps.
  auto share_at = [&](const ClusterShape& shape, AllreduceAlgorithm a) {
    return shared_core ? allreduce_cpu_share(shape, a, tiers_at(shape)) : 0.0;
  };
  // On a shared core, with the all-reduce measured beside compute (bench model
  // --under-load) for the tiers a shape uses, the timeline where each slows
  // the other; otherwise the cpu share charged to compute.
  auto under_load_for = [&](const ClusterShape& shape, AllreduceAlgorithm a) {
    return shared_core && shape.world() > 1 && under_load_links(shape, a, tiers_at(shape)).complete;
  };
  auto step_at = [&](const StepProfile& profile, const ClusterShape& shape, AllreduceAlgorithm a) {
    const double scale = scale_at(shape.world());
    return under_load_for(shape, a)
               ? predict_step_shared_core(profile, shape, a, tiers_at(shape), scale)
               : predict_step(profile, shape, a, tiers_at(shape), scale, share_at(shape, a));
  };
  const double base_step = step_at(prof, {1, 1}, AllreduceAlgorithm::ring).step_s;

  std::vector<Point> points;
  std::string csv =
      "nodes,ranks,algorithm,step_s,compute_s,comm_s,exposed_s,exposed_share,"
      "scaling_efficiency,speedup,contention_s\n";
  for (AllreduceAlgorithm a : o.algorithms)
    for (int n : nodes) {
      Point pt{{n, o.ranks_per_node}, a, {}, 0};
      const int w = pt.shape.world();
      pt.p = step_at(prof, pt.shape, a);
      // Per-rank throughput against one rank's: weak, step(1)/step(W); strong,
      // the same global batch, step(1)/(W step(W)).
      pt.efficiency = strong ? base_step / (w * pt.p.step_s) : base_step / pt.p.step_s;
      csv += fmt::format("{},{},{},{:.6g},{:.6g},{:.6g},{:.6g},{:.4f},{:.4f},{:.4f},{:.6g}\n", n, w,
                         allreduce_algorithm_name(a), pt.p.step_s, pt.p.compute_s, pt.p.comm_s,
                         pt.p.exposed_s, pt.p.exposed_share(), pt.efficiency, pt.efficiency * w,
                         pt.p.contention_s);
      points.push_back(pt);
    }
  if (o.csv.empty()) {
    std::fputs(csv.c_str(), stdout);
  } else {
    write_output_text(o.csv, csv, "--csv");
  }

  // The verdict, for the first algorithm at the largest node count.
  const AllreduceAlgorithm a = points.front().algorithm;
  const Point& last = points[nodes.size() - 1];
  // Communication-bound: the all-reduces of a step take longer than backward,
  // which overlap can hide them behind.
  int hidden_up_to = 0;
  bool bound_somewhere = false;
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    const Point& pt = points[i];
    const bool bound = pt.p.comm_s > prof.backward_s * scale_at(pt.shape.world());
    if (!bound && !bound_somewhere) hidden_up_to = pt.shape.nodes;
    bound_somewhere |= bound;
  }
  double cap_bytes = 0;
  for (const BucketProfile& b : prof.buckets) cap_bytes = std::max(cap_bytes, b.bytes);
  const double mib = 1024.0 * 1024.0;
  std::string bound_text =
      !bound_somewhere ? fmt::format("not communication-bound up to {} nodes", last.shape.nodes)
      : hidden_up_to == 0
          ? fmt::format("communication-bound from {} nodes", points.front().shape.nodes)
          : fmt::format("communication-bound above {} nodes", hidden_up_to);
  bound_text += fmt::format(" with buckets of {:.2f} MiB", cap_bytes / mib);
  const double suggested = suggest_bucket_bytes(last.shape, a, tiers_at(last.shape));
  std::string cap_text =
      "; no bucket cap suggestion: the model has no latency or no bandwidth term here";
  if (suggested > 0) {
    const StepPrediction re = step_at(rebucket(prof, suggested), last.shape, a);
    const double more = 100.0 * (last.p.exposed_s - re.exposed_s) / last.p.step_s;
    cap_text = more > 0.05 ? fmt::format("; a bucket cap of {:.2f} MiB would hide {:.1f}% more",
                                         suggested / mib, more)
                           : fmt::format("; a bucket cap of {:.2f} MiB would hide nothing more",
                                         suggested / mib);
  }
  std::printf(
      "# profile: %zu step(s) of rank %d from %s: before backward %.3f ms, backward %.3f "
      "ms, optimizer %.3f ms, %zu bucket(s), %.2f MiB in all; %s scaling, %s all-reduce\n",
      tp.steps_used, o.profile_rank, o.trace.c_str(), prof.before_backward_s * 1e3,
      prof.backward_s * 1e3, prof.optimizer_s * 1e3, prof.buckets.size(), prof.total_bytes() / mib,
      strong ? "strong" : "weak", allreduce_algorithm_name(a));
  if (curve) {
    std::string measured;
    for (const ComputePoint& p : curve->curve.points())
      if (p.colocated == 1) measured += fmt::format("{}{:g}", measured.empty() ? "" : ",", p.batch);
    const int w = last.shape.world();
    const double b = batch_at(w);
    if (strong && !measured.empty())
      std::printf(
          "# compute per rank from the curve %s (%s, measured at batch %s): batch %g takes %.3f "
          "ms per step against %.3f ms in proportion to the profiled batch %g (%d rank(s))\n",
          o.compute_curve.c_str(), curve->model.c_str(), measured.c_str(), b,
          1e3 * curve->curve.step_s_at(b),
          1e3 * curve->curve.step_s_at(o.profile_batch) * o.profile_ranks / w, o.profile_batch, w);
    // Ranks sharing a machine: the measured slowdown at each predicted point.
    for (int n : nodes) {
      const int world = n * o.ranks_per_node, k = colocated_at(world);
      if (k < 2) continue;
      const int used = curve->curve.measured_colocated(k);
      if (used < 2) {
        std::printf(
            "# %d rank(s) at once on one machine at %d node(s): not measured in the curve, so "
            "compute is taken as one rank alone measured it\n",
            k, n);
        continue;
      }
      const double alone = curve->curve.step_s_at(batch_at(world), 1);
      const double beside = curve->curve.step_s_at(batch_at(world), k);
      bool paired = false;
      for (const ComputePoint& p : curve->curve.points())
        paired = paired || (p.colocated == used && p.slowdown > 0);
      std::printf(
          "# %d rank(s) at once on one machine at %d node(s): batch %g takes %.3f ms per step "
          "(a synchronous step, measured with %d at once%s) against %.3f ms alone (x%.2f)\n",
          k, n, batch_at(world), 1e3 * beside, used,
          paired ? ", side by side with one rank alone" : "", 1e3 * alone, beside / alone);
    }
  }
  {
    const LinkParams& tier =
        last.shape.nodes > 1 ? tiers_at(last.shape).inter : tiers_at(last.shape).intra;
    if (!tier.step_curve.empty())
      std::printf(
          "# all-reduce times: each ring step priced from the measured sizes around its chunk "
          "(the line through the two nearest; beyond them the fit's beta), not from the fit "
          "alone (--pricing fit)\n");
    else
      std::printf("# all-reduce times: from the fit's alpha and beta%s\n",
                  o.pricing == "fit" ? "" : " (the model file keeps no samples)");
  }
  if (shared_core && under_load_for(last.shape, a)) {
    const UnderLoadLinks u = under_load_links(last.shape, a, tiers_at(last.shape));
    std::printf(
        "# %d rank(s) per node on %d core(s): communication shares the core it computes on; "
        "measured beside compute, a %.2f MiB all-reduce at %d node(s) takes %.3f ms (%.3f ms "
        "alone) and compute loses %.0f%% of its rate while one runs\n",
        o.ranks_per_node, o.cores_per_node, cap_bytes / mib, last.shape.nodes,
        1e3 * allreduce_seconds(cap_bytes, last.shape, a, u.tiers),
        1e3 * allreduce_seconds(cap_bytes, last.shape, a, tiers_at(last.shape)),
        100 * u.compute_loss);
  } else if (shared_core) {
    std::printf(
        "# %d rank(s) per node on %d core(s): communication has no core of its own, so "
        "overlapped all-reduces take %.0f%% of their time from compute (the model's cpu share)\n",
        o.ranks_per_node, o.cores_per_node, 100 * share_at(last.shape, a));
  }
  // Printed per node count: the lag (or, in older files, the wait) is measured
  // on each and grows with the ranks that share a machine.
  for (std::size_t i = 0; i < nodes.size(); ++i) {  // the verdict's algorithm only
    const Point& pt = points[i];
    const double lag = allreduce_arrival_lag(pt.shape, a, tiers_at(pt.shape));
    const double wait = allreduce_arrival_wait(pt.shape, a, tiers_at(pt.shape));
    if (lag > 0)
      std::printf(
          "# %d node(s): ranks end their compute apart, the last %.3f ms after the ranks' mean, "
          "so each bucket's all-reduce starts that late (bench model --after-compute)\n",
          pt.shape.nodes, 1e3 * lag);
    else if (wait > 0)
      std::printf(
          "# %d node(s): ranks end their compute apart, and the step's last all-reduce waits "
          "%.3f ms for the last of them (bench model --after-compute)\n",
          pt.shape.nodes, 1e3 * wait);
  }
  std::printf("predicted efficiency at %d nodes: %.0f%% (%s%s)%s\n", last.shape.nodes,
              100 * last.efficiency, bound_text.c_str(), cap_text.c_str(),
              used_poor ? " [from a fit reported poor]" : "");
  std::fflush(stdout);
  return 0;
}

}  // namespace ringtrain
