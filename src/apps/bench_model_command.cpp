// `ringtrain bench model`: the link benchmark's command line (the measurement,
// fit and file are perf/link_bench.h). It turns -b/-e/-f or --sizes into the
// sizes to time, refused on every rank before any collective, and --backend
// into the backends to measure.
#include <algorithm>
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "apps/command.h"
#include "ringtrain/comm/communicator.h"
#include "ringtrain/core/check.h"
#include "ringtrain/core/error.h"
#include "ringtrain/perf/link_bench.h"

namespace ringtrain::apps {
namespace {

// The flags as typed; the measurement's own options are bound directly.
struct LinkBenchArgs {
  std::string min_bytes = "4K";
  std::string max_bytes = "16M";
  int factor = 4;
  std::string sizes;  // explicit comma list; empty: the -b/-e/-f sweep
  std::string backends = "all";
  LinkBenchOptions bench;
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
std::vector<std::size_t> sizes_to_time(const LinkBenchArgs& o) {
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

CLI::App* add_bench_model(CLI::App& bench, CommandContext& ctx) {
  auto o = std::make_shared<LinkBenchArgs>();
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
  sub->add_option("-n,--iters", o->bench.iters, "Calls per timed round")
      ->capture_default_str()
      ->check(CLI::Range(1, 100000));
  sub->add_option("--rounds", o->bench.rounds, "Timed rounds per size (the median counts)")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000));
  sub->add_option("-w,--warmup_iters", o->bench.warmup, "Untimed calls per size")
      ->capture_default_str()
      ->check(CLI::Range(0, 100000));
  sub->add_option("--backend", o->backends,
                  "Backends: a comma list of nccl, shm, ring, mpi, or all")
      ->capture_default_str();
  sub->add_option("--poor-bound", o->bench.poor_bound,
                  "Largest relative residual of a usable fit (0.25 = 25%)")
      ->capture_default_str()
      ->check(CLI::Range(0.001, 10.0));
  sub->add_option("--json", o->bench.json, "Merge this tier's fits into this model file");
  sub->add_flag("--under-load", o->bench.under_load,
                "Also time the sizes beside a compute thread on each rank (a shared core)");
  sub->add_option("--after-compute", o->bench.after_compute_ms,
                  "Also time each size right after this many ms of compute on every rank (the "
                  "all-reduce a step exposes after backward); 0: not measured")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 10000.0));
  sub->add_option("--timeout", o->bench.timeout, "Seconds a collective may wait for a peer")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  add_device_options(sub, ctx, "cpu");
  sub->parse_complete_callback([&ctx, o] {
    if (o->sizes.empty())
      RT_CHECK(size_of("-b", o->min_bytes) <= size_of("-e", o->max_bytes),
               "-b {} is larger than -e {}", o->min_bytes, o->max_bytes);
    // A bad list is refused on every rank before any collective.
    o->bench.sizes = sizes_to_time(*o);
    ctx.action = [o](const Topology& topo) {
      (void)link_bench_tier(topo);  // a job that is not one tier hears so before its --backend
      LinkBenchOptions options = o->bench;
      options.backends = backend_list(o->backends, topo);
      return run_link_bench(options, topo);
    };
  });
  return sub;
}

}  // namespace
}  // namespace ringtrain::apps

RINGTRAIN_REGISTER_COMMAND("bench", "model", 40, ringtrain::apps::add_bench_model)
