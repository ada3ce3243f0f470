// See link_bench.h: the sweeps, their fits, the printed tables and the file.
#include "ringtrain/perf/link_bench.h"

#include <time.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/median.h"
#include "ringtrain/comm/communicator.h"
#include "ringtrain/core/check.h"
#include "ringtrain/core/error.h"
#include "ringtrain/core/timer.h"
#include "ringtrain/launch/topology.h"
#include "ringtrain/perf/after_compute_sweep.h"
#include "ringtrain/perf/compute_load.h"
#include "ringtrain/perf/link_fit.h"
#include "ringtrain/perf/link_fit_file.h"

namespace ringtrain {
namespace {

// CPU seconds of this process (all threads; the kernel's network work done on
// its behalf counts as system time).
double process_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

}  // namespace

std::string link_bench_tier(const Topology& topo) {
  RT_CHECK(topo.world_size() >= 2,
           "bench model needs at least 2 ranks (one tier: ranks of one node, or one rank on each "
           "of several nodes), got {}",
           topo.world_size());
  if (topo.node_count() == 1) return "intra";
  std::map<int, int> per_node;
  for (const RankPlacement& p : topo.placements()) ++per_node[p.node];
  for (const auto& [node, count] : per_node)
    RT_CHECK(count == 1,
             "bench model measures one link tier per job: this one has {} rank(s) on node {} and "
             "{} node(s); run it with all ranks on one node (the tier inside a node), then with "
             "one rank per node (the tier across nodes)",
             count, node, topo.node_count());
  return "inter";
}

int run_link_bench(const LinkBenchOptions& o, const Topology& topo) {
  const std::string tier = link_bench_tier(topo);
  const std::vector<std::size_t>& sizes = o.sizes;
  CommOptions co;
  co.timeout_seconds = o.timeout;
  // Timings are compared on the host, whatever device the backends use.
  std::unique_ptr<Communicator> harness = make_communicator("mpi", topo.on_host(), co);
  auto max_over_ranks = [&](double v) {
    harness->allreduce(BufferView{&v, 1, DType::f64, Device::cpu()},
                       BufferView{&v, 1, DType::f64, Device::cpu()}, ReduceOp::max);
    return v;
  };
  const bool root = topo.rank() == 0;
  const int w = topo.world_size();
  if (root)
    std::printf(
        "# ringtrain bench model: tier %s (%s), %d rank(s) on %d node(s); per size: %d warm-up, "
        "median of %d rounds of %d calls, slowest rank\n",
        tier.c_str(), tier == "intra" ? "inside a node" : "across nodes, one rank per node", w,
        topo.node_count(), o.warmup, o.rounds, o.iters);
  nlohmann::json backends_json = nlohmann::json::object();
  int poor = 0;
  for (const std::string& kind : o.backends) {
    std::unique_ptr<Communicator> comm = make_communicator(kind, topo, co);
    BufferView all = comm->allocate(sizes.back() / 4, DType::f32);
    // Values do not change the time; zeros keep host sums finite.
    if (all.device.is_cpu()) std::memset(all.ptr, 0, all.bytes());
    // One sweep of the sizes; with a compute load beside it, also the share of
    // the load's rate each size's all-reduces cost.
    struct Sweep {
      std::vector<TimingSample> samples;
      std::vector<double> cpu_shares;    // per size: CPU time over wall time, busiest rank
      std::vector<double> compute_loss;  // per size: 1 - load rate beside / alone, worst rank
    };
    auto sweep = [&](const ComputeLoad* load) {
      Sweep out;
      for (std::size_t bytes : sizes) {
        BufferView buf{all.ptr, bytes / 4, DType::f32, all.device};
        for (int i = 0; i < o.warmup; ++i) comm->allreduce(buf, buf, ReduceOp::sum);
        // The load's rate alone just before, so a machine that drifts does
        // not bias the comparison.
        const double alone = load ? load->rate_alone(0.2) : 0;
        std::vector<double> per_round, cpu_per_round, loss_per_round;
        for (int r = 0; r < o.rounds; ++r) {
          comm->barrier();
          const double cpu0 = process_cpu_seconds();
          const std::uint64_t done0 = load ? load->done() : 0;
          Stopwatch sw;
          for (int i = 0; i < o.iters; ++i) comm->allreduce(buf, buf, ReduceOp::sum);
          const double wall = sw.seconds();
          if (load && wall > 0 && alone > 0)
            loss_per_round.push_back(
                std::clamp(1 - static_cast<double>(load->done() - done0) / wall / alone, 0.0, 1.0));
          cpu_per_round.push_back(wall > 0 ? (process_cpu_seconds() - cpu0) / wall : 0);
          per_round.push_back(max_over_ranks(wall / o.iters));
        }
        out.samples.push_back({static_cast<double>(bytes), median(per_round)});
        out.cpu_shares.push_back(std::min(1.0, max_over_ranks(median(cpu_per_round))));
        if (load) out.compute_loss.push_back(max_over_ranks(median(loss_per_round)));
      }
      return out;
    };
    const Sweep plain = sweep(nullptr);
    const std::vector<TimingSample>& samples = plain.samples;
    const std::vector<double>& cpu_shares = plain.cpu_shares;
    const LinkFit fit = fit_ring_allreduce(samples, w, o.poor_bound);
    // How much of a core an all-reduce keeps busy: the median over the sizes.
    const double cpu_share = median(cpu_shares);
    nlohmann::json rows = nlohmann::json::array();
    std::string table = fmt::format("# {} ({} tier)\n# {:>12} {:>12} {:>12} {:>9} {:>6}\n", kind,
                                    tier, "size (B)", "time (us)", "fit (us)", "residual", "cpu");
    for (std::size_t k = 0; k < samples.size(); ++k) {
      const double f = fit.intercept_s + fit.slope_s_per_byte * samples[k].bytes;
      table += fmt::format("  {:>12.0f} {:>12.2f} {:>12.2f} {:>8.1f}% {:>5.0f}%\n",
                           samples[k].bytes, samples[k].seconds * 1e6, f * 1e6,
                           100 * fit.residuals[k], 100 * cpu_shares[k]);
      rows.push_back({{"bytes", samples[k].bytes},
                      {"seconds", samples[k].seconds},
                      {"fit_seconds", f},
                      {"residual", fit.residuals[k]},
                      {"cpu_share", cpu_shares[k]}});
    }
    const double gbs = fit.link.beta_s_per_byte > 0 ? 1e-9 / fit.link.beta_s_per_byte : 0;
    table += fmt::format(
        "{} {}: alpha {:.2f} us per step, beta {:.4g} ns/B ({:.3f} GB/s, {:.2f} Gbit/s); largest "
        "residual {:.1f}% (bound {:.0f}%): {}\n",
        tier, kind, fit.link.alpha_s * 1e6, fit.link.beta_s_per_byte * 1e9, gbs, gbs * 8,
        100 * fit.max_abs_residual, 100 * o.poor_bound,
        fit.poor ? "POOR fit, not used by bench predict" : "good fit");
    table += fmt::format(
        "{} {}: an all-reduce keeps {:.0f}% of a core busy (median over the sizes; 'bench predict "
        "--cores-per-node' charges it to compute where communication has no core of its own)\n",
        tier, kind, 100 * cpu_share);
    if (root) {
      std::fputs(table.c_str(), stdout);
      std::fflush(stdout);
    }
    poor += fit.poor ? 1 : 0;
    backends_json[kind] = {{"alpha_s", fit.link.alpha_s},
                           {"beta_s_per_byte", fit.link.beta_s_per_byte},
                           {"bandwidth_gbs", gbs},
                           {"max_abs_residual", fit.max_abs_residual},
                           {"poor", fit.poor},
                           {"cpu_share", cpu_share},
                           {"samples", rows}};
    if (o.under_load) {
      Sweep loaded;
      {
        const ComputeLoad load;
        loaded = sweep(&load);
      }
      const LinkFit lf = fit_ring_allreduce(loaded.samples, w, o.poor_bound);
      const double loss = median(loaded.compute_loss);
      nlohmann::json lrows = nlohmann::json::array();
      std::string lt = fmt::format(
          "# {} ({} tier) beside a compute thread on each rank\n# {:>12} {:>12} {:>12} {:>12} "
          "{:>9} {:>13}\n",
          kind, tier, "size (B)", "alone (us)", "loaded (us)", "fit (us)", "residual",
          "compute loss");
      for (std::size_t k = 0; k < loaded.samples.size(); ++k) {
        const double f = lf.intercept_s + lf.slope_s_per_byte * loaded.samples[k].bytes;
        lt += fmt::format("  {:>12.0f} {:>12.2f} {:>12.2f} {:>12.2f} {:>8.1f}% {:>12.0f}%\n",
                          loaded.samples[k].bytes, samples[k].seconds * 1e6,
                          loaded.samples[k].seconds * 1e6, f * 1e6, 100 * lf.residuals[k],
                          100 * loaded.compute_loss[k]);
        lrows.push_back({{"bytes", loaded.samples[k].bytes},
                         {"seconds", loaded.samples[k].seconds},
                         {"fit_seconds", f},
                         {"residual", lf.residuals[k]},
                         {"compute_loss", loaded.compute_loss[k]}});
      }
      const double lgbs = lf.link.beta_s_per_byte > 0 ? 1e-9 / lf.link.beta_s_per_byte : 0;
      lt += fmt::format(
          "{} {} under load: alpha {:.2f} us per step, beta {:.4g} ns/B ({:.2f} Gbit/s); largest "
          "residual {:.1f}%: {}; compute beside an all-reduce loses {:.0f}% of its rate (median "
          "over the sizes)\n",
          tier, kind, lf.link.alpha_s * 1e6, lf.link.beta_s_per_byte * 1e9, lgbs * 8,
          100 * lf.max_abs_residual, lf.poor ? "POOR fit" : "good fit", 100 * loss);
      if (root) {
        std::fputs(lt.c_str(), stdout);
        std::fflush(stdout);
      }
      poor += lf.poor ? 1 : 0;
      backends_json[kind]["under_load"] = {{"alpha_s", lf.link.alpha_s},
                                           {"beta_s_per_byte", lf.link.beta_s_per_byte},
                                           {"max_abs_residual", lf.max_abs_residual},
                                           {"poor", lf.poor},
                                           {"compute_loss", loss},
                                           {"samples", lrows}};
    }
    if (o.after_compute_ms > 0) {
      const AfterComputeSweep ac = sweep_after_compute(*comm, all, sizes, o, topo, *harness);
      std::string at = fmt::format(
          "# {} ({} tier) right after {:.1f} ms of compute on every rank ({:.2f} ms at the ranks' "
          "mean rate), means over ranks: 'after' from the rank's own compute end, 'cycle' one "
          "compute and all-reduce, 'wait' = cycle - compute at the mean rate - all-reduce alone "
          "(both timed before each round; median of rounds)\n"
          "# {:>12} {:>12} {:>12} {:>12} {:>12}\n",
          kind, tier, o.after_compute_ms, 1e3 * ac.compute_mean_s, "size (B)", "alone (us)",
          "after (us)", "cycle (us)", "wait (us)");
      nlohmann::json arows = nlohmann::json::array();
      for (std::size_t k = 0; k < ac.latency.size(); ++k) {
        at += fmt::format("  {:>12.0f} {:>12.2f} {:>12.2f} {:>12.2f} {:>12.2f}\n",
                          ac.latency[k].bytes, samples[k].seconds * 1e6,
                          ac.latency[k].seconds * 1e6, ac.cycle_s[k] * 1e6, ac.wait_s[k] * 1e6);
        arows.push_back({{"bytes", ac.latency[k].bytes},
                         {"seconds", ac.latency[k].seconds},
                         {"cycle_s", ac.cycle_s[k]},
                         {"wait_s", ac.wait_s[k]}});
      }
      // The wait hardly depends on the size (it is the last rank's lateness):
      // one number, the median over the sizes, never below 0.
      const double wait = std::max(0.0, median(ac.wait_s));
      at += fmt::format(
          "{} {} after compute: the ranks ended their compute {:.2f} ms apart (median spread), "
          "the last {:.2f} ms after the ranks' mean ('bench predict' starts each bucket's "
          "all-reduce that late); the all-reduce after compute waits {:.2f} ms for the last "
          "(median over the sizes)\n",
          tier, kind, 1e3 * ac.spread_s, 1e3 * ac.lag_s, 1e3 * wait);
      if (root) {
        std::fputs(at.c_str(), stdout);
        std::fflush(stdout);
      }
      backends_json[kind]["after_compute"] = {{"compute_s", o.after_compute_ms * 1e-3},
                                              {"compute_mean_rate_s", ac.compute_mean_s},
                                              {"arrival_spread_s", ac.spread_s},
                                              {"arrival_lag_s", ac.lag_s},
                                              {"arrival_wait_s", wait},
                                              {"samples", arows}};
    }
  }
  if (root && !o.json.empty()) {
    // Merge: the other tier's entry (from another run) stays.
    nlohmann::json doc = {{"kind", "ringtrain comm model"}, {"tiers", nlohmann::json::object()}};
    if (std::ifstream in(o.json); in.good()) doc = read_link_fit_file(o.json);
    doc["poor_bound"] = o.poor_bound;
    nlohmann::json t = {{"ranks", w}, {"nodes", topo.node_count()}, {"backends", backends_json}};
    // launch/netns-cluster describes shaped links here.
    if (const char* state = std::getenv("RINGTRAIN_NETNS_CLUSTER")) {
      std::ifstream link(std::string(state) + "/link");
      std::string line;
      if (std::getline(link, line)) t["link"] = line;
    }
    doc["tiers"][tier] = t;
    // A ring over shaped links is not the same line at every ring size: keep
    // the fit of each node count measured ('bench predict' takes the nearest).
    if (tier == "inter") doc["tiers"]["inter_by_nodes"][std::to_string(topo.node_count())] = t;
    const std::string tmp = o.json + ".tmp";
    bool written = false;
    {
      std::ofstream out(tmp);
      RT_CHECK(out.good(), "--json {}: cannot open the file for writing", o.json);
      out << doc.dump(1) << "\n";
      out.flush();
      written = out.good();
    }
    // A failed write or rename leaves no temporary beside the file.
    if (!written || std::rename(tmp.c_str(), o.json.c_str()) != 0) {
      const int err = errno;
      std::remove(tmp.c_str());
      RT_CHECK(false, "--json {}: {}: {}", o.json,
               written ? "cannot replace the file" : "write failed", std::strerror(err));
    }
    std::printf("# wrote the %s tier to %s\n", tier.c_str(), o.json.c_str());
  }
  if (root && poor > 0)
    std::printf("# %d fit(s) poor: largest residual over %.0f%%\n", poor, 100 * o.poor_bound);
  return 0;
}

}  // namespace ringtrain
