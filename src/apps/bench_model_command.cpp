// `ringtrain bench model`: measures all-reduce time at a sweep of sizes for the
// link tier this job spans (all ranks on one node: "intra"; one rank on each of
// several nodes: "inter") and fits latency alpha and inverse bandwidth beta per
// backend (perf/link_fit.h). Prints the fit and its residuals; --json merges
// the tier into a model file that `ringtrain bench predict` reads, so the two
// tiers come from two runs.
#include <time.h>

#include <algorithm>
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

#include "apps/command.h"
#include "core/median.h"
#include "ringtrain/comm/communicator.h"
#include "ringtrain/core/check.h"
#include "ringtrain/core/error.h"
#include "ringtrain/core/timer.h"
#include "ringtrain/perf/allreduce_time.h"
#include "ringtrain/perf/compute_load.h"
#include "ringtrain/perf/link_fit_file.h"

namespace ringtrain::apps {
namespace {

struct ModelOptions {
  std::string min_bytes = "4K";
  std::string max_bytes = "16M";
  int factor = 4;
  std::string sizes;  // explicit comma list; empty: the -b/-e/-f sweep
  int iters = 10;
  int rounds = 5;
  int warmup = 3;
  std::string backends = "all";
  double poor_bound = 0.25;
  std::string json;
  double timeout = 300;
  bool under_load = false;
  double after_compute_ms = 0;  // 0: not measured
};

std::size_t size_of(const std::string& flag, const std::string& text) {
  std::size_t pos = 0;
  unsigned long long v = 0;
  try {
    v = std::stoull(text, &pos);
  } catch (const std::exception&) {
    throw Error(fmt::format("{} '{}' is not a size (e.g. 4K, 16M)", flag, text));
  }
  const std::string unit = text.substr(pos);
  std::size_t mult = 1;
  if (unit == "K" || unit == "k" || unit == "KiB")
    mult = std::size_t{1} << 10;
  else if (unit == "M" || unit == "m" || unit == "MiB")
    mult = std::size_t{1} << 20;
  else if (unit == "G" || unit == "g" || unit == "GiB")
    mult = std::size_t{1} << 30;
  else
    RT_CHECK(unit.empty(), "{} '{}': unknown unit '{}' (use K, M or G)", flag, text, unit);
  return static_cast<std::size_t>(v) * mult;
}

// The entries of a comma list given to FLAG; an empty entry is an error that
// shows EXAMPLE.
std::vector<std::string> comma_items(const std::string& flag, const std::string& text,
                                     const char* example) {
  std::vector<std::string> out;
  std::size_t start = 0;
  for (;;) {
    const std::size_t comma = text.find(',', start);
    std::string item = text.substr(start, comma == std::string::npos ? comma : comma - start);
    RT_CHECK(!item.empty(), "{} '{}': empty entry (expected e.g. {})", flag, text, example);
    out.push_back(std::move(item));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

// The sizes to time: the explicit --sizes list (sorted, each rounded down to
// whole floats), or the geometric sweep -b .. -e by -f.
std::vector<std::size_t> sizes_to_time(const ModelOptions& o) {
  std::vector<std::size_t> sizes;
  if (!o.sizes.empty()) {
    for (const std::string& item : comma_items("--sizes", o.sizes, "20520,512K,1M,2M")) {
      const std::size_t bytes = size_of("--sizes", item);
      RT_CHECK(bytes >= 4, "--sizes '{}': {} is below one float (4 bytes)", o.sizes, item);
      sizes.push_back(bytes / 4 * 4);
    }
    std::sort(sizes.begin(), sizes.end());
    sizes.erase(std::unique(sizes.begin(), sizes.end()), sizes.end());
    RT_CHECK(sizes.size() >= 2, "--sizes '{}': a line needs at least two distinct sizes, got {}",
             o.sizes, sizes.size());
    return sizes;
  }
  const std::size_t lo = size_of("-b", o.min_bytes), hi = size_of("-e", o.max_bytes);
  for (std::size_t s = std::max<std::size_t>(lo, 4); s <= hi;
       s *= static_cast<std::size_t>(o.factor))
    sizes.push_back(s / 4 * 4);
  RT_CHECK(sizes.size() >= 2,
           "bench model needs at least two sizes to fit a line: -b {} -e {} -f {} gives {}",
           o.min_bytes, o.max_bytes, o.factor, sizes.size());
  return sizes;
}

std::vector<std::string> backend_list(const std::string& text, const Topology& topo) {
  if (text == "all") return available_backends(topo);
  return comma_items("--backend", text, "ring,mpi or all");
}

// "intra" when every rank is on one node, "inter" when each node has one rank.
// A job that mixes both measures neither tier alone.
std::string tier_of(const Topology& topo) {
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

// CPU seconds of this process (all threads; the kernel's network work done on
// its behalf counts as system time).
double process_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

// The all-reduce a step exposes: each call comes right after the same amount
// of compute on every rank (sized to take --after-compute ms on a core of its
// own). Where ranks share cores the compute curve prices a step's compute at
// the ranks' mean rate, but the ranks end it apart and the all-reduce waits
// for the last: a cycle of compute and all-reduce takes longer than the
// compute at the mean rate plus the all-reduce alone. That excess is the wait.
struct AfterCompute {
  std::vector<TimingSample> latency;  // per size: own compute end -> all-reduce end, ranks' mean
  std::vector<double> cycle_s;        // per size: one compute and all-reduce, ranks' mean
  // per size: the cycle minus the compute at the mean rate and the all-reduce
  // alone, both timed just before it (the median over rounds): the wait
  std::vector<double> wait_s;
  double compute_mean_s = 0;  // the compute at the ranks' mean rate, all at once (median)
  double spread_s = 0;        // median over calls of the ranks' latest minus earliest arrival
  double lag_s = 0;           // median over calls of the latest arrival minus the ranks' mean
};

AfterCompute sweep_after_compute(Communicator& comm, const BufferView& all,
                                 const std::vector<std::size_t>& sizes, const ModelOptions& o,
                                 const Topology& topo, Communicator& harness) {
  const int w = topo.world_size();
  auto reduce = [&](std::vector<double>& v, ReduceOp op) {
    BufferView view{v.data(), v.size(), DType::f64, Device::cpu()};
    harness.allreduce(view, view, op);
  };
  // Each rank times its core alone (the others wait), and all run the same
  // work, as the ranks of a training step do: the mean of those rates over
  // --after-compute ms. (Sized per rank, a rate timed a little high on one rank
  // gave it more work every cycle, and the others a wait no training step has.)
  std::vector<double> rate{0};
  for (int r = 0; r < w; ++r) {
    harness.barrier();
    if (r == topo.rank()) rate[0] = ComputeBurst::gemms_per_second(0.2);
  }
  reduce(rate, ReduceOp::sum);
  ComputeBurst burst(
      static_cast<std::uint64_t>(std::max(1.0, rate[0] / w * o.after_compute_ms * 1e-3)));
  AfterCompute out;
  // The compute at the mean rate: every rank computes for the same wall time,
  // so all compete throughout; 1 / the ranks' mean rate. Timed in each round
  // just before its cycles, as the machine's speed drifts.
  auto compute_at_mean_rate = [&] {
    harness.barrier();
    Stopwatch sw;
    double done = 0;
    while (sw.seconds() < 0.1 || done < 3) {
      burst.run();
      ++done;
    }
    std::vector<double> rate_sum{done / sw.seconds()};
    reduce(rate_sum, ReduceOp::sum);
    return rate_sum[0] > 0 ? w / rate_sum[0] : 0.0;
  };
  std::vector<double> spreads, lags, means;
  for (std::size_t bytes : sizes) {
    BufferView buf{all.ptr, bytes / 4, DType::f32, all.device};
    for (int i = 0; i < o.warmup; ++i) {
      burst.run();
      comm.allreduce(buf, buf, ReduceOp::sum);
    }
    std::vector<double> lat_rounds, cycle_rounds, excess_rounds;
    for (int r = 0; r < o.rounds; ++r) {
      // The compute at the mean rate and the all-reduce alone, timed just
      // before the cycles they are subtracted from.
      const double mean_s = compute_at_mean_rate();
      means.push_back(mean_s);
      comm.barrier();
      Stopwatch alone_sw;
      for (int i = 0; i < o.iters; ++i) comm.allreduce(buf, buf, ReduceOp::sum);
      std::vector<double> alone{alone_sw.seconds() / o.iters};
      reduce(alone, ReduceOp::sum);
      comm.barrier();
      std::vector<double> lat(static_cast<std::size_t>(o.iters));
      Stopwatch round;
      for (double& l : lat) {
        burst.run();
        Stopwatch sw;
        comm.allreduce(buf, buf, ReduceOp::sum);
        l = sw.seconds();
      }
      std::vector<double> cycle{round.seconds() / static_cast<double>(lat.size())};
      // Outside the timed calls: means over ranks and the arrival spread.
      std::vector<double> sum = lat, hi = lat, lo = lat;
      reduce(sum, ReduceOp::sum);
      reduce(hi, ReduceOp::max);
      reduce(lo, ReduceOp::min);
      reduce(cycle, ReduceOp::sum);
      double mean = 0;
      for (std::size_t i = 0; i < lat.size(); ++i) {
        mean += sum[i] / w;
        spreads.push_back(hi[i] - lo[i]);
        // The all-reduce ends together, so the last to arrive waited least.
        lags.push_back(std::max(0.0, sum[i] / w - lo[i]));
      }
      lat_rounds.push_back(mean / static_cast<double>(lat.size()));
      cycle_rounds.push_back(cycle[0] / w);
      excess_rounds.push_back(cycle[0] / w - mean_s - alone[0] / w);
    }
    out.latency.push_back({static_cast<double>(bytes), median(lat_rounds)});
    out.cycle_s.push_back(median(cycle_rounds));
    out.wait_s.push_back(median(excess_rounds));
  }
  out.compute_mean_s = median(means);
  out.spread_s = median(spreads);
  out.lag_s = median(lags);
  return out;
}

int run_model(const ModelOptions& o, const Topology& topo) {
  const std::string tier = tier_of(topo);
  const std::vector<std::size_t> sizes = sizes_to_time(o);
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
  for (const std::string& kind : backend_list(o.backends, topo)) {
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
      const AfterCompute ac = sweep_after_compute(*comm, all, sizes, o, topo, *harness);
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
    {
      std::ofstream out(tmp);
      RT_CHECK(out.good(), "--json {}: cannot open the file for writing", o.json);
      out << doc.dump(1) << "\n";
      RT_CHECK(out.good(), "--json {}: write failed", o.json);
    }
    RT_CHECK(std::rename(tmp.c_str(), o.json.c_str()) == 0, "--json {}: cannot replace the file",
             o.json);
    std::printf("# wrote the %s tier to %s\n", tier.c_str(), o.json.c_str());
  }
  if (root && poor > 0)
    std::printf("# %d fit(s) poor: largest residual over %.0f%%\n", poor, 100 * o.poor_bound);
  return 0;
}

CLI::App* add_bench_model(CLI::App& bench, CommandContext& ctx) {
  auto o = std::make_shared<ModelOptions>();
  CLI::App* sub = bench.add_subcommand(
      "model", "Fit all-reduce latency and bandwidth (alpha, beta) of this job's link tier");
  sub->footer(
      "Run it once per tier: all ranks on one node (inside a node), and one rank per node\n"
      "(across nodes), merging both into one file:\n"
      "  mpirun -np 2 ringtrain bench model --json model.json\n"
      "  launch/netns-cluster --nodes 2 --ranks-per-node 1 ringtrain bench model --json "
      "model.json\n"
      "Each size is all-reduced in rounds of -n calls after -w warm-up calls; the time is the\n"
      "median round of the slowest rank. The fit is t(n) = 2(W-1) alpha + 2(W-1)/W n beta (a\n"
      "ring over W ranks) by least squares on relative error; a fit whose largest residual\n"
      "exceeds --poor-bound is reported POOR and 'bench predict' refuses it. Fit the sizes\n"
      "the job will all-reduce: its smallest gradient bucket and half to twice the cap (e.g.\n"
      "--sizes 20520,512K,1M,2M for 1 MiB buckets and one of 20 KiB). A shaped or congested\n"
      "link is not a line over all sizes, and a fit of large sizes alone misses the latency\n"
      "of a small bucket. The 'cpu' column is the\n"
      "process's CPU time over the wall time of the busiest rank (its median over the sizes\n"
      "is the model's cpu_share).\n"
      "--under-load sweeps the sizes again with a compute thread (128x128 GEMMs) beside the\n"
      "all-reduces on each rank, as overlap runs them beside backward: it fits alpha and beta\n"
      "of that case and measures how much of the thread's rate the all-reduces cost\n"
      "(compute_loss). 'bench predict --cores-per-node' uses both where communication shares\n"
      "the core it computes on.\n"
      "--after-compute MS times each size again right after MS ms of compute (the same GEMMs\n"
      "on every rank, sized on each rank's core alone): the exposed all-reduce of a step.\n"
      "Where ranks share cores they end their compute apart and the all-reduce waits for the\n"
      "last, so a cycle of compute and all-reduce takes longer than the compute at the ranks'\n"
      "mean rate (all computing at once) plus the all-reduce alone. The excess (median over\n"
      "the sizes) is the tier's arrival_wait_s. How far the last rank ends behind the ranks'\n"
      "mean is its arrival_lag_s: 'bench predict' starts each bucket's all-reduce that long\n"
      "after the ranks' mean produced it (in training the ranks stay that far apart all\n"
      "step); a file without it has the wait added to a step's exposed time instead.");
  CLI::Option* min_opt =
      sub->add_option("-b,--minbytes", o->min_bytes, "Smallest size (suffix K, M, G)")
          ->capture_default_str();
  CLI::Option* max_opt =
      sub->add_option("-e,--maxbytes", o->max_bytes, "Largest size (suffix K, M, G)")
          ->capture_default_str();
  CLI::Option* factor_opt =
      sub->add_option("-f,--stepfactor", o->factor, "Size factor between rows")
          ->capture_default_str()
          ->check(CLI::Range(2, 1024));
  sub->add_option("--sizes", o->sizes,
                  "Time exactly these sizes instead of the -b/-e/-f sweep: a comma list (suffix K, "
                  "M, G), e.g. a job's smallest bucket and its cap's range: 20520,512K,1M,2M")
      ->excludes(min_opt)
      ->excludes(max_opt)
      ->excludes(factor_opt);
  sub->add_option("-n,--iters", o->iters, "Calls per timed round")
      ->capture_default_str()
      ->check(CLI::Range(1, 100000));
  sub->add_option("--rounds", o->rounds, "Timed rounds per size (the median counts)")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000));
  sub->add_option("-w,--warmup_iters", o->warmup, "Untimed calls per size")
      ->capture_default_str()
      ->check(CLI::Range(0, 100000));
  sub->add_option("--backend", o->backends,
                  "Backends: a comma list of nccl, shm, ring, mpi, or all")
      ->capture_default_str();
  sub->add_option("--poor-bound", o->poor_bound,
                  "Largest relative residual of a usable fit (0.25 = 25%)")
      ->capture_default_str()
      ->check(CLI::Range(0.001, 10.0));
  sub->add_option("--json", o->json, "Merge this tier's fits into this model file");
  sub->add_flag("--under-load", o->under_load,
                "Also time the sizes beside a compute thread on each rank (a shared core)");
  sub->add_option("--after-compute", o->after_compute_ms,
                  "Also time each size right after this many ms of compute on every rank (the "
                  "all-reduce a step exposes after backward); 0: not measured")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 10000.0));
  sub->add_option("--timeout", o->timeout, "Seconds a collective may wait for a peer")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  add_device_options(sub, ctx, "cpu");
  sub->parse_complete_callback([&ctx, o] {
    if (o->sizes.empty())
      RT_CHECK(size_of("-b", o->min_bytes) <= size_of("-e", o->max_bytes),
               "-b {} is larger than -e {}", o->min_bytes, o->max_bytes);
    (void)sizes_to_time(*o);  // a bad list is refused on every rank before any collective
    ctx.action = [o](const Topology& topo) { return run_model(*o, topo); };
  });
  return sub;
}

}  // namespace
}  // namespace ringtrain::apps

RINGTRAIN_REGISTER_COMMAND("bench", "model", 40, ringtrain::apps::add_bench_model)
