// `ringtrain data inspect`: under mpirun, every rank prints the sample indices
// it reads in one epoch, one line per step, so users can check the sharding of
// their own job (no two ranks share a sample; every rank runs the same steps).
// With --dump DIR, every rank also writes the float32 values it would feed the
// model for each sample (after --augment or --eval-transform), one .npy file
// per sample index (numpy.load gives it with its shape), so runs at
// different world sizes or thread counts compare file by file.
#include <cstdio>
#include <filesystem>
#include <memory>

#include "apps/command.h"
#include "ringtrain/comm/control_channel.h"
#include "ringtrain/core/check.h"
#include "ringtrain/core/log.h"
#include "ringtrain/data/dataset.h"
#include "ringtrain/data/npy_file.h"
#include "ringtrain/data/output_guard.h"
#include "ringtrain/data/sample_transform.h"
#include "ringtrain/data/sharded_sampler.h"
#include "ringtrain/train/train_config.h"

namespace ringtrain::apps {
namespace {

// Runs f; its Error comes back naming `flag` first ("--dump: cannot create ...").
template <typename F>
void as_flag_error(const char* flag, F&& f) {
  try {
    f();
  } catch (const Error& e) {
    throw Error(fmt::format("{}: {}", flag, e.what()));
  }
}

struct InspectOptions {
  std::string data, split = "train", out, expect_shape;
  std::string augment, eval_transform, dump;
  std::size_t loader_threads = 1;
  std::size_t batch = 0;
  std::uint64_t epoch = 0, seed = kDefaultSeed;  // train's
  bool eval = false;
  bool force = false;
  double timeout = 300;
};

std::string index_line(const std::vector<std::uint64_t>& idx) {
  std::string s;
  s.reserve(idx.size() * 7);
  for (std::size_t i = 0; i < idx.size(); ++i) {
    if (i) s.push_back(' ');
    s += std::to_string(idx[i]);
  }
  return s;
}

int run_inspect(const InspectOptions& o, const Topology& topo) {
  CommOptions options;
  options.timeout_seconds = o.timeout;
  const std::unique_ptr<Communicator> control = make_control_communicator(topo, options);
  Dataset ds = Dataset::open_on_all_ranks(o.data, o.split, *control);
  RT_CHECK(!ds.is_tokens(),
           "{} holds tokens ({} of them, vocabulary {}): its samples are windows of a model's "
           "context, which train and eval take from the model ('ringtrain data check' checks "
           "the tokens)",
           ds.describe(), ds.token_count(), ds.num_classes());
  // Training shows --augment; --eval shows the evaluation transform, derived
  // from --augment unless given.
  const std::string spec = !o.eval                     ? o.augment
                           : !o.eval_transform.empty() ? o.eval_transform
                           : !o.augment.empty()        ? SampleTransform::eval_spec_of(o.augment)
                                                       : "";
  if (!spec.empty() && spec != "none") {
    auto transform =
        SampleTransform::parse(spec, o.seed, o.eval ? "--eval-transform" : "--augment");
    const BatchMixSpec batch = transform->batch_mix();
    // Batch steps alone leave the samples as stored (as in training).
    if (!transform->per_sample_empty() || !batch.any()) {
      ds.set_transform(std::move(transform), o.loader_threads);
      log0("data: {} {} -> samples {}", o.eval ? "evaluation transform" : "augmentation",
           ds.transform()->describe(), shape_string(ds.sample_shape()));
    }
    if (batch.any())
      log0("data: {} mix each training batch on the model's device; these samples are before it",
           batch.describe());
  }
  if (!o.dump.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(o.dump, ec);
    RT_CHECK(!ec, "--dump {}: cannot create the directory: {}", o.dump, ec.message());
  }
  std::vector<float> x;
  // The model's input of these samples, one file each: DIR/<index>.npy.
  auto dump = [&](const std::vector<std::uint64_t>& idx, std::uint64_t epoch) {
    if (o.dump.empty()) return;
    x.resize(idx.size() * ds.sample_elements());
    ds.read(idx, x.data(), nullptr, epoch);
    const std::size_t n = ds.sample_elements();
    for (std::size_t i = 0; i < idx.size(); ++i) {
      const std::string path = fmt::format("{}/{}.npy", o.dump, idx[i]);
      as_flag_error("--dump", [&] { write_npy(path, x.data() + i * n, ds.sample_shape()); });
    }
  };
  if (!o.expect_shape.empty()) ds.check_sample_shape(parse_shape(o.expect_shape, "--expect-shape"));
  const int rank = topo.rank();
  std::unique_ptr<FILE, int (*)(FILE*)> file(nullptr, std::fclose);
  if (!o.out.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(o.out, ec);
    RT_CHECK(!ec, "--out {}: cannot create the directory: {}", o.out, ec.message());
    const std::string path = fmt::format("{}/rank-{}.txt", o.out, rank);
    file.reset(std::fopen(path.c_str(), "w"));
    RT_CHECK(file != nullptr, "--out: cannot create {}", path);
  }
  // One write per line, so lines of different ranks never interleave mid-line.
  auto emit = [&](const std::string& body) {
    const std::string line = file ? body + "\n" : fmt::format("rank {}: {}\n", rank, body);
    FILE* f = file ? file.get() : stdout;
    RT_CHECK(std::fwrite(line.data(), 1, line.size(), f) == line.size(), "write error ({})",
             file ? o.out : "stdout");
  };
  if (o.eval) {
    const EvalShard shard = eval_shard(ds.size(), rank, topo.world_size());
    log0("data: evaluation of {} splits N = {} into {} contiguous ranges, no drop, no padding",
         ds.describe(), ds.size(), topo.world_size());
    std::vector<std::uint64_t> idx;
    for (std::uint64_t b = shard.begin, k = 0; b < shard.end; b += o.batch, ++k) {
      idx.clear();
      for (std::uint64_t i = b; i < std::min<std::uint64_t>(shard.end, b + o.batch); ++i)
        idx.push_back(i);
      emit(fmt::format("eval batch {}: {}", k, index_line(idx)));
      dump(idx, 0);
    }
  } else {
    const ShardedSampler sampler(ds.size(), o.batch, rank, topo.world_size(), o.seed);
    log0("{} ({}, seed {}, epoch {})", sampler.describe(), ds.describe(), o.seed, o.epoch);
    for (std::uint64_t s = 0; s < sampler.steps_per_epoch(); ++s) {
      const std::vector<std::uint64_t> idx = sampler.rank_indices({o.epoch, s});
      emit(fmt::format("epoch {} step {}: {}", o.epoch, s, index_line(idx)));
      dump(idx, o.epoch);
    }
  }
  std::fflush(file ? file.get() : stdout);
  if (file) log0("data: wrote {}/rank-<r>.txt for {} rank(s)", o.out, topo.world_size());
  if (!o.dump.empty())
    log0(
        "data: wrote each sample's {} float32 values to {}/<index>.npy (shape {}: "
        "numpy.load reads it)",
        ds.sample_elements(), o.dump, shape_string(ds.sample_shape()));
  return 0;
}

CLI::App* add_data(CLI::App& app, CommandContext&) {
  CLI::App* sub = app.add_subcommand(
      "data", "Dataset tools: inspect the sharding of a job, check a dataset for bad values");
  sub->require_subcommand(1);
  return sub;
}

CLI::App* add_data_inspect(CLI::App& parent, CommandContext& ctx) {
  auto o = std::make_shared<InspectOptions>();
  CLI::App* sub = parent.add_subcommand("inspect",
                                        "Each rank prints the sample indices it reads in one "
                                        "epoch, one line per step (run under mpirun "
                                        "with the job's rank count)");
  sub->add_option("--data", o->data, "HDF5 dataset file (see 'ringtrain convert')")->required();
  sub->add_option("--split", o->split, "Split: train, test or val")->capture_default_str();
  sub->add_option("--batch", o->batch, "Batch size per rank (as for train)")
      ->required()
      ->check(CLI::PositiveNumber);
  sub->add_option("--epoch", o->epoch, "Epoch whose permutation to show")->capture_default_str();
  sub->add_option("--seed", o->seed, "Data seed (as for train)")->capture_default_str();
  sub->add_option("--out", o->out,
                  "Write DIR/rank-R.txt per rank instead of stdout (DIR new or empty, or --force)");
  sub->add_flag("--eval", o->eval,
                "Show the evaluation split (contiguous per rank, no drop) instead of training");
  sub->add_option("--expect-shape", o->expect_shape,
                  "Fail unless samples have this shape (e.g. 1,28,28)");
  sub->add_option("--augment", o->augment,
                  "Augmentation spec (as for train): with --dump, the augmented samples");
  sub->add_option("--eval-transform", o->eval_transform,
                  "Evaluation transform (as for train), used with --eval");
  sub->add_option("--loader-threads", o->loader_threads, "Decode/augment threads per rank")
      ->check(CLI::Range(1, 256))
      ->capture_default_str();
  sub->add_option("--dump", o->dump,
                  "Write the float32 values each rank feeds the model, one NumPy file "
                  "DIR/<index>.npy per sample (numpy.load reads its shape; DIR new or empty, or "
                  "--force)");
  sub->add_flag("--force", o->force,
                "Write into an --out or --dump directory that already holds files");
  sub->add_option("--timeout", o->timeout,
                  "Seconds the ranks wait for each other before the job aborts, naming the late "
                  "ranks")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  sub->parse_complete_callback([&ctx, o] {
    ctx.topology.device = DeviceRequest::cpu;
    if (!o->expect_shape.empty()) parse_shape(o->expect_shape, "--expect-shape");
    // Before MPI starts, so before any rank writes there: an earlier run's
    // files would mix with this run's (a comparison of dumps would lie).
    if (!o->out.empty()) guard_output_directory(o->out, o->force, "--out");
    if (!o->dump.empty()) guard_output_directory(o->dump, o->force, "--dump");
    ctx.action = [o](const Topology& t) { return run_inspect(*o, t); };
  });
  return sub;
}

}  // namespace
}  // namespace ringtrain::apps

RINGTRAIN_REGISTER_COMMAND("", "data", 35, ringtrain::apps::add_data)
RINGTRAIN_REGISTER_COMMAND("data", "inspect", 10, ringtrain::apps::add_data_inspect)
