// `ringtrain bench predict`: the scaling prediction's command line (the
// prediction is perf/scaling_prediction.h). It turns --nodes and --algorithm
// into lists and checks the flags that go together, on every rank before
// anything is read.
#include <algorithm>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "apps/command.h"
#include "ringtrain/core/check.h"
#include "ringtrain/core/error.h"
#include "ringtrain/data/output_guard.h"
#include "ringtrain/perf/allreduce_time.h"
#include "ringtrain/perf/scaling_prediction.h"

namespace ringtrain::apps {
namespace {

// The flags as typed; the prediction's own options are bound directly.
struct PredictArgs {
  std::string algorithms = "ring,hierarchical";
  std::string nodes = "1,2,4,8,16,32,64,128,256";
  bool force = false;
  ScalingPredictionOptions prediction;
};

std::vector<int> count_list(const std::string& flag, const std::string& text) {
  std::vector<int> out;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    std::size_t pos = 0;
    int v = 0;
    try {
      v = std::stoi(item, &pos);
    } catch (const std::exception&) {
      pos = 0;
    }
    RT_CHECK(pos == item.size() && !item.empty() && v >= 1,
             "{} '{}': '{}' is not a positive whole number (expected e.g. 1,2,4)", flag, text,
             item);
    out.push_back(v);
  }
  RT_CHECK(!out.empty(), "{} is empty (expected e.g. 1,2,4)", flag);
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

std::vector<AllreduceAlgorithm> algorithm_list(const std::string& text) {
  std::vector<AllreduceAlgorithm> out;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) out.push_back(parse_allreduce_algorithm(item));
  RT_CHECK(!out.empty(), "--algorithm is empty (expected ring, hierarchical or both)");
  return out;
}

CLI::App* add_bench_predict(CLI::App& bench, CommandContext& ctx) {
  auto o = std::make_shared<PredictArgs>();
  ScalingPredictionOptions& p = o->prediction;
  CLI::App* sub = bench.add_subcommand(
      "predict", "Predict step time and scaling efficiency at other node counts (step model)");
  sub->footer(
      "From a short run's trace and a 'bench model' file, e.g.\n"
      "  ringtrain train ... --max-steps 30 --trace t.json\n"
      "  ringtrain bench predict --trace t.json --comm-model model.json --nodes 1,2,4,8\n"
      "Model: bucket k's all-reduce starts when backward has produced it and the previous\n"
      "one is done, and must finish before the optimizer; the exposed part is what backward\n"
      "does not hide. An all-reduce over W ranks is 2(W-1) ring steps of n/W bytes; a step\n"
      "is priced from the model file's measured sizes around its chunk (linear between the\n"
      "two nearest, the fit's beta beyond them), or by alpha and beta alone (--pricing fit).\n"
      "Assumes no congestion, one link tier per level, compute per rank as\n"
      "profiled (weak scaling) or in proportion to the per-rank batch (strong scaling;\n"
      "with --compute-curve, as measured at each batch: 'bench step --json' lines).\n"
      "--compute-curve FILE: lines of 'bench step --json'; those run by K ranks at once on\n"
      "one machine ('mpirun -np K ... bench step', the slowest rank's time) give compute beside\n"
      "K-1 others: --colocation per-node (ranks per node share a machine, as on a cluster) or\n"
      "all (every rank on one machine, as netns-cluster nodes are). A count not measured\n"
      "takes the nearest measured one below it. A line of 'bench step --side-by-side' gives\n"
      "its slowdown beside the others as timed round by round against one rank alone, and\n"
      "that slowdown is applied to the curve alone.\n"
      "--cores-per-node C: with as many ranks per node as cores (or more), a rank's\n"
      "communication shares the core it computes on. Where the model was measured with\n"
      "'bench model --under-load', each side slows the other: during backward an all-reduce\n"
      "takes its time beside compute and backward loses compute_loss of its rate. Otherwise\n"
      "an overlapped all-reduce takes its CPU share ('bench model' cpu_share) of its time\n"
      "from compute: step = compute + exposed + share x (comm - exposed). Without\n"
      "--cores-per-node (0), overlap is free.\n"
      "CSV columns: nodes, ranks, algorithm, step_s, compute_s, comm_s, exposed_s,\n"
      "exposed_share, scaling_efficiency (per-rank throughput against one rank's), speedup,\n"
      "contention_s (how much later compute ends for communication on a shared core).");
  sub->add_option("--trace", p.trace, "Chrome trace of a short run (ringtrain train --trace)")
      ->required();
  sub->add_option("--comm-model", p.link_fit_file, "Model file of 'ringtrain bench model --json'")
      ->required();
  sub->add_option("--backend", p.backend, "Backend whose fits to use")->capture_default_str();
  sub->add_option("--algorithm", o->algorithms, "ring, hierarchical, or both (comma list)")
      ->capture_default_str();
  sub->add_option("--nodes", o->nodes, "Node counts to predict")->capture_default_str();
  sub->add_option("--ranks-per-node", p.ranks_per_node, "Ranks on each node")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 16));
  sub->add_option("--cores-per-node", p.cores_per_node,
                  "Cores per node; with ranks-per-node >= this, communication shares the compute "
                  "core (0: assume it has a core of its own)")
      ->capture_default_str()
      ->check(CLI::Range(0, 1 << 20));
  sub->add_option("--scaling", p.scaling, "weak (batch per rank fixed) or strong (global)")
      ->capture_default_str()
      ->check(CLI::IsMember({"weak", "strong"}));
  sub->add_option("--profile-ranks", p.profile_ranks,
                  "Ranks of the profiled run (strong scaling: its per-rank batch)")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 20));
  sub->add_option("--compute-curve", p.compute_curve,
                  "Compute per step against the per-rank batch (strong scaling: a small batch is "
                  "slower per sample) and against the ranks computing at once on one machine: "
                  "the lines of 'ringtrain bench step --json' at several --batch values and "
                  "mpirun -np counts; needs --profile-batch")
      ->check(CLI::ExistingFile);
  sub->add_option("--colocation", p.colocation,
                  "Which ranks share one machine's cores: per-node (a cluster) or all (every "
                  "node on one machine, as netns-cluster nodes); with --compute-curve")
      ->capture_default_str()
      ->check(CLI::IsMember({"per-node", "all"}));
  sub->add_option("--profile-batch", p.profile_batch,
                  "Per-rank batch of the profiled run (with --compute-curve)")
      ->check(CLI::PositiveNumber);
  sub->add_option("--profile-rank", p.profile_rank, "Rank of the trace to profile")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  sub->add_option("--warmup-steps", p.warmup_steps, "Steps of the trace left out as warm-up")
      ->capture_default_str();
  sub->add_flag("--allow-poor-fit", p.allow_poor, "Use fits reported poor");
  sub->add_option("--pricing", p.pricing,
                  "How an all-reduce is priced: measured (each ring step from the measured sizes "
                  "around its chunk, the fit beyond them) or fit (alpha and beta everywhere)")
      ->capture_default_str()
      ->check(CLI::IsMember({"measured", "fit"}));
  sub->add_option("--csv", p.csv,
                  "Write the CSV here instead of to stdout (an existing file is refused unless "
                  "--force)");
  sub->add_flag("--force", o->force, "Replace an existing --csv file");
  add_device_options(sub, ctx, "cpu");
  sub->parse_complete_callback([&ctx, o] {
    ScalingPredictionOptions& prediction = o->prediction;
    prediction.nodes = count_list("--nodes", o->nodes);
    prediction.algorithms = algorithm_list(o->algorithms);
    if (!prediction.csv.empty())
      guard_output(prediction.csv,
                   {{"--trace", prediction.trace},
                    {"--comm-model", prediction.link_fit_file},
                    {"--compute-curve", prediction.compute_curve}},
                   o->force, "--csv");
    if (!prediction.compute_curve.empty()) {
      RT_CHECK(prediction.profile_batch > 0,
               "--compute-curve needs --profile-batch, the per-rank batch of the profiled run");
    } else {
      RT_CHECK(prediction.profile_batch == 0, "--profile-batch goes with --compute-curve");
    }
    ctx.action = [o](const Topology& topo) {
      // Pure arithmetic: one rank answers, the others have nothing to do.
      return topo.rank() == 0 ? run_scaling_prediction(o->prediction) : 0;
    };
  });
  return sub;
}

}  // namespace
}  // namespace ringtrain::apps

RINGTRAIN_REGISTER_COMMAND("bench", "predict", 45, ringtrain::apps::add_bench_predict)
