// `ringtrain bench data`: samples/s of the data path (sampler + HDF5 read +
// prefetch) against a plain in-memory copy of the same batches, per rank, with
// and without --cache. The consumer does no work, so this is the loader's
// ceiling; a training step only has to stay above it.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>

#include "apps/command.h"
#include "ringtrain/comm/control_channel.h"
#include "ringtrain/core/check.h"
#include "ringtrain/core/log.h"
#include "ringtrain/core/timer.h"
#include "ringtrain/data/converters.h"
#include "ringtrain/data/dataset.h"
#include "ringtrain/data/prefetcher.h"
#include "ringtrain/data/sample_transform.h"
#include "ringtrain/data/sharded_sampler.h"

namespace ringtrain::apps {
namespace {

struct BenchDataOptions {
  std::string data;
  std::string split = "train";
  std::size_t batch = 64, depth = 2, steps = 0, repeat = 5;
  std::uint64_t seed = 0;
  std::string cache = "both";
  double timeout = 300;
  std::string augment;             // image sets: time the augmenting loader instead
  std::size_t loader_threads = 1;  // with --augment: compared with 1 thread
};

struct Row {
  std::string mode;
  double seconds = 0, wait = 0;
};

// Per-rank samples/s: min, mean and max over ranks, so a slow rank shows.
struct RateStats {
  double min = 0, mean = 0, max = 0;
};
RateStats gather_rate(double rate, Communicator& control) {
  RateStats s{rate, rate, rate};
  control.allreduce(view_of(&s.min, 1), view_of(&s.min, 1), ReduceOp::min);
  control.allreduce(view_of(&s.max, 1), view_of(&s.max, 1), ReduceOp::max);
  control.allreduce(view_of(&s.mean, 1), view_of(&s.mean, 1), ReduceOp::sum);
  s.mean /= control.size();
  return s;
}

std::string default_dataset(const Topology& topo, Communicator& control) {
  // Fashion-MNIST converted once into the temp directory, by rank 0.
  const std::string path =
      (std::filesystem::temp_directory_path() / "ringtrain-bench-fashion.h5").string();
  if (topo.rank() == 0 && !std::filesystem::exists(path)) {
    log0("bench data: converting Fashion-MNIST from {} to {}", kFashionMnistDir, path);
    IdxConvertOptions o;
    const std::string dir = kFashionMnistDir;
    o.train_images = dir + "/train-images-idx3-ubyte.gz";
    o.train_labels = dir + "/train-labels-idx1-ubyte.gz";
    o.test_images = dir + "/t10k-images-idx3-ubyte.gz";
    o.test_labels = dir + "/t10k-labels-idx1-ubyte.gz";
    o.output = path;
    convert_idx(o);
  }
  control.barrier();
  return path;
}

// --augment: images/s of the loader with the transform on 1 and on N loader
// threads per rank, reading from the file and from --cache. The consumer does
// no work, so this is what the loader can feed a step.
int run_bench_augment(const BenchDataOptions& o, const Topology& topo, Communicator& control,
                      const std::string& path) {
  struct Run {
    std::string source;
    std::size_t threads;
    double seconds = 0, wait = 0;
  };
  std::vector<std::size_t> threads{1};
  if (o.loader_threads > 1) threads.push_back(o.loader_threads);
  std::vector<std::string> sources;
  if (o.cache != "on") sources.push_back("file");
  if (o.cache != "off") sources.push_back("--cache");
  const auto transform = SampleTransform::parse(o.augment, o.seed, "--augment");
  std::vector<Run> rows;
  std::string shapes;
  for (const std::string& source : sources)
    for (std::size_t t : threads) {
      Dataset ds = Dataset::open(path, o.split);
      if (source == "--cache" && !ds.enable_cache(0, topo.local_size())) continue;
      ds.set_transform(transform, t);
      shapes = fmt::format("{} x {} {} -> {}", ds.size(), shape_string(ds.stored_shape()),
                           sample_dtype_name(ds.stored_dtype()), shape_string(ds.sample_shape()));
      const ShardedSampler sampler(ds.size(), o.batch, topo.rank(), topo.world_size(), o.seed);
      const std::size_t steps = o.steps ? o.steps : sampler.steps_per_epoch();
      RT_CHECK(steps >= 2, "bench data --augment: {} has {} step(s) per epoch at batch {}; need 2",
               path, steps, o.batch);
      std::vector<std::pair<double, double>> runs;
      for (std::size_t r = 0; r < o.repeat; ++r) {
        control.barrier();
        double wait = 0;
        // Timed from the first batch on, as the peer's: slot allocation and
        // thread start-up are once per run, not per batch.
        Prefetcher p(ds, sampler, {r, 0}, o.depth, topo.device());
        p.next();
        Stopwatch sw;
        for (std::size_t s = 1; s < steps; ++s) wait += p.next().wait_seconds;
        runs.emplace_back(sw.seconds() / static_cast<double>((steps - 1) * o.batch), wait);
      }
      std::sort(runs.begin(), runs.end());
      rows.push_back({source, t, runs[runs.size() / 2].first, runs[runs.size() / 2].second});
    }
  std::string out = fmt::format("# bench data --augment {}\n", transform->describe());
  out += fmt::format("# {}: {}, batch {} per rank, {} rank(s), median of {} epochs\n", path, shapes,
                     o.batch, topo.world_size(), o.repeat);
  out += fmt::format("# {:<8} {:>14} {:>16} {:>16} {:>14}\n", "source", "loader threads",
                     "images/s/rank", "images/s/thread", "total images/s");
  for (const Run& r : rows) {
    const RateStats rate = gather_rate(1.0 / r.seconds, control);
    out += fmt::format("  {:<8} {:>14} {:>16.0f} {:>16.0f} {:>14.0f}\n", r.source, r.threads,
                       rate.mean, rate.mean / static_cast<double>(r.threads),
                       rate.mean * topo.world_size());
  }
  if (topo.rank() == 0) {
    std::fputs(out.c_str(), stdout);
    std::fflush(stdout);
  }
  return 0;
}

int run_bench_data(const BenchDataOptions& o, const Topology& topo) {
  // Every wait goes through a communicator with --timeout: a missing rank
  // ends the job naming it instead of hanging it.
  CommOptions comm_options;
  comm_options.timeout_seconds = o.timeout;
  const std::unique_ptr<Communicator> control = make_control_communicator(topo, comm_options);
  const std::string path = o.data.empty() ? default_dataset(topo, *control) : o.data;
  if (!o.augment.empty()) {
    RT_CHECK(!o.data.empty(),
             "bench data --augment needs --data FILE (an image set from "
             "'ringtrain convert images')");
    return run_bench_augment(o, topo, *control, path);
  }
  Dataset ds = Dataset::open_on_all_ranks(path, o.split, *control);
  const ShardedSampler sampler(ds.size(), o.batch, topo.rank(), topo.world_size(), o.seed);
  const std::size_t steps = o.steps ? o.steps : sampler.steps_per_epoch();
  const std::size_t elems = ds.sample_elements();
  log0(
      "bench data: {} ({} x {} {}), batch {} per rank, {} ranks, {} steps x {} runs per path "
      "(interleaved, median), prefetch depth {}, device {}",
      ds.describe(), ds.size(), shape_string(ds.sample_shape()),
      sample_dtype_name(ds.stored_dtype()), o.batch, topo.world_size(), steps, o.repeat, o.depth,
      device_name(topo.device()));

  // The paths, each timed over the same batches (epoch 0 from step 0).
  struct Path {
    std::string name;
    std::function<double(double&)> run;  // returns seconds, adds the consumer's wait
  };
  std::vector<Path> paths;

  // Baseline: the whole split already normalised in memory; each step copies
  // the same rows (same sampler indices) into a batch buffer.
  std::vector<float> all(ds.size() * elems);
  {
    std::vector<std::uint64_t> every(ds.size());
    for (std::size_t i = 0; i < every.size(); ++i) every[i] = i;
    const std::size_t slab = 4096;
    for (std::size_t b = 0; b < ds.size(); b += slab) {
      const std::size_t n = std::min(slab, ds.size() - b);
      ds.read(std::span(every).subspan(b, n), all.data() + b * elems, nullptr);
    }
  }
  std::vector<float> x(o.batch * elems);
  std::vector<std::int32_t> y(o.batch);
  paths.push_back({"in-memory copy (baseline)", [&](double&) {
                     const auto& labels = ds.labels();
                     Stopwatch sw;
                     DataCursor c{0, 0};
                     for (std::size_t s = 0; s < steps; ++s, c = sampler.next(c)) {
                       const auto idx = sampler.rank_indices(c);
                       for (std::size_t i = 0; i < idx.size(); ++i) {
                         std::memcpy(x.data() + i * elems, all.data() + idx[i] * elems,
                                     elems * sizeof(float));
                         y[i] = labels[idx[i]];
                       }
                     }
                     return sw.seconds();
                   }});
  auto prefetch = [&](Dataset& source) {
    return [&](double& wait) {
      Stopwatch sw;
      Prefetcher p(source, sampler, {0, 0}, o.depth, topo.device());
      for (std::size_t s = 0; s < steps; ++s) wait += p.next().wait_seconds;
      return sw.seconds();
    };
  };
  std::optional<Dataset> hyperslab, cached;
  if (o.cache != "on") {
    if (ds.direct_reads()) paths.push_back({"prefetch, direct reads", prefetch(ds)});
    hyperslab.emplace(Dataset::open(path, o.split));
    hyperslab->use_hdf5_reads();
    paths.push_back({"prefetch, HDF5 hyperslabs", prefetch(*hyperslab)});
  }
  if (o.cache != "off") {
    cached.emplace(Dataset::open(path, o.split));
    Stopwatch load;
    const bool on = cached->enable_cache(0, topo.local_size());
    log0("bench data: --cache {} ({:.1f} MiB, loaded in {:.2f} s, not timed below)",
         on ? "on" : "off (does not fit)", cached->stored_bytes() / 1048576.0, load.seconds());
    if (on) paths.push_back({"prefetch --cache", prefetch(*cached)});
  }

  // Round-robin over the paths, so a change in the machine's load hits all of
  // them alike; the median run of each counts.
  std::vector<std::vector<std::pair<double, double>>> runs(paths.size());
  for (std::size_t r = 0; r < o.repeat; ++r)
    for (std::size_t k = 0; k < paths.size(); ++k) {
      control->barrier();
      double wait = 0;
      const double seconds = paths[k].run(wait);
      runs[k].emplace_back(seconds, wait);
    }
  std::vector<Row> rows;
  for (std::size_t k = 0; k < paths.size(); ++k) {
    std::sort(runs[k].begin(), runs[k].end());
    const auto& m = runs[k][runs[k].size() / 2];
    rows.push_back({paths[k].name, m.first, m.second});
  }

  const double samples = static_cast<double>(steps * o.batch);
  std::vector<RateStats> stats;
  for (const Row& r : rows) stats.push_back(gather_rate(samples / r.seconds, *control));
  if (topo.rank() == 0) {
    std::string out =
        fmt::format("# {:<32} {:>14} {:>14} {:>14} {:>10} {:>12}\n", "path", "samples/s/rank",
                    "(min rank)", "(max rank)", "vs copy", "wait s (r0)");
    for (std::size_t i = 0; i < rows.size(); ++i)
      out += fmt::format("  {:<32} {:>14.0f} {:>14.0f} {:>14.0f} {:>9.2f}x {:>12.3f}\n",
                         rows[i].mode, stats[i].mean, stats[i].min, stats[i].max,
                         stats[i].mean / stats[0].mean, rows[i].wait);
    out += fmt::format("# total over {} ranks: ", topo.world_size());
    for (std::size_t i = 0; i < rows.size(); ++i)
      out += fmt::format("{}{} {:.0f} samples/s", i ? ", " : "", rows[i].mode,
                         stats[i].mean * topo.world_size());
    out +=
        "\n# goals: prefetch --cache >= 0.9x the in-memory copy; no cache >= 50000 samples/s per "
        "rank\n";
    std::fputs(out.c_str(), stdout);
    std::fflush(stdout);
  }
  return 0;
}

CLI::App* add_bench_data(CLI::App& parent, CommandContext& ctx) {
  auto o = std::make_shared<BenchDataOptions>();
  CLI::App* sub = parent.add_subcommand("data",
                                        "Data path samples/s (sampler + HDF5 read + prefetch) vs "
                                        "an in-memory copy of the same batches");
  sub->add_option("--data", o->data,
                  "HDF5 dataset (default: Fashion-MNIST, converted once into the temp directory)");
  sub->add_option("--split", o->split, "Split to read")->capture_default_str();
  sub->add_option("--batch", o->batch, "Batch size per rank")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  sub->add_option("--depth", o->depth, "Prefetch queue depth")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  sub->add_option("--steps", o->steps, "Steps per measurement (0: one epoch)")
      ->capture_default_str();
  sub->add_option("--seed", o->seed, "Data seed")->capture_default_str();
  sub->add_option("--repeat", o->repeat, "Runs per path; the median counts")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  sub->add_option("--cache", o->cache, "Measure without the cache (off), with it (on), or both")
      ->check(CLI::IsMember({"off", "on", "both"}))
      ->capture_default_str();
  sub->add_option("--timeout", o->timeout,
                  "Seconds the ranks wait for each other before the job aborts, naming the late "
                  "ranks")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  sub->add_option("--augment", o->augment,
                  "Time the augmenting loader on an image set (e.g. imagenet): images/s per "
                  "loader thread and in total");
  sub->add_option("--loader-threads", o->loader_threads,
                  "With --augment: loader threads per rank, measured beside 1")
      ->check(CLI::Range(1, 256))
      ->capture_default_str();
  add_device_options(sub, ctx, "cpu");
  sub->parse_complete_callback(
      [&ctx, o] { ctx.action = [o](const Topology& t) { return run_bench_data(*o, t); }; });
  return sub;
}

}  // namespace
}  // namespace ringtrain::apps

RINGTRAIN_REGISTER_COMMAND("bench", "data", 40, ringtrain::apps::add_bench_data)
