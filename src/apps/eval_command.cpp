// `ringtrain eval`: evaluate a checkpoint (or every new one, with --watch) on a
// split, alone or under mpirun with the split sharded exactly as in training.
// Defaults to --device cpu so that it never takes a training GPU.
#include <chrono>
#include <filesystem>
#include <fstream>
#include <set>
#include <thread>

#include <nlohmann/json.hpp>

#include "apps/command.h"
#include "ringtrain/comm/control_channel.h"
#include "ringtrain/core/check.h"
#include "ringtrain/core/log.h"
#include "ringtrain/data/dataset.h"
#include "ringtrain/train/checkpoint.h"
#include "ringtrain/train/checkpoint_loader.h"
#include "ringtrain/train/evaluator.h"
#include "ringtrain/train/metrics_log.h"
#include "ringtrain/train/stop_signal.h"
#include "ringtrain/train/tensorboard_writer.h"

namespace ringtrain::apps {
namespace {

struct EvalFlags {
  std::string ckpt;
  std::string data;
  std::string split = "test";
  std::size_t batch = 256;
  std::string json;
  std::string watch;
  double interval = 30;
  std::string logdir;
  std::uint64_t until_step = 0;
  double timeout = 300;
};

nlohmann::json result_json(const EvalResult& r, std::uint64_t step, const std::string& path,
                           const std::vector<std::string>& class_names) {
  nlohmann::json per_class = nlohmann::json::array();
  const auto acc = r.per_class_accuracy();
  for (std::size_t k = 0; k < acc.size(); ++k) {
    std::uint64_t support = 0;
    for (int p = 0; p < r.num_classes; ++p) support += r.confusion[k * static_cast<std::size_t>(r.num_classes) + static_cast<std::size_t>(p)];
    per_class.push_back({{"class", k},
                         {"name", k < class_names.size() ? class_names[k] : std::to_string(k)},
                         {"accuracy", acc[k]},
                         {"n", support}});
  }
  nlohmann::json confusion = nlohmann::json::array();
  for (int t = 0; t < r.num_classes; ++t) {
    nlohmann::json row = nlohmann::json::array();
    for (int p = 0; p < r.num_classes; ++p)
      row.push_back(r.confusion[static_cast<std::size_t>(t * r.num_classes + p)]);
    confusion.push_back(row);
  }
  return {{"checkpoint", path}, {"step", step},         {"n", r.n},          {"loss", r.loss},
          {"accuracy", r.accuracy}, {"per_class", per_class}, {"confusion", confusion}};
}

std::string format_report(const EvalResult& r, std::uint64_t step, const std::string& path,
                          const std::string& split, const std::vector<std::string>& names) {
  std::string out = fmt::format("checkpoint {} (step {}), split {}: n={} loss={:.4f} accuracy={:.4f}\n", path, step,
                                split, r.n, r.loss, r.accuracy);
  const auto acc = r.per_class_accuracy();
  std::size_t w = 5;
  for (const auto& n : names) w = std::max(w, n.size());
  out += "per-class accuracy:\n";
  for (std::size_t k = 0; k < acc.size(); ++k)
    out += fmt::format("  {:>3} {:<{}}  {:.4f}\n", k, k < names.size() ? names[k] : std::string(), w, acc[k]);
  out += "confusion matrix (rows: true class, columns: predicted):\n      ";
  for (int p = 0; p < r.num_classes; ++p) out += fmt::format("{:>6}", p);
  out += "\n";
  for (int t = 0; t < r.num_classes; ++t) {
    out += fmt::format("  {:>3} ", t);
    for (int p = 0; p < r.num_classes; ++p) out += fmt::format("{:>6}", r.confusion[static_cast<std::size_t>(t * r.num_classes + p)]);
    out += "\n";
  }
  return out;
}

void write_json_file(const std::string& path, const nlohmann::json& j) {
  std::ofstream f(path);
  RT_CHECK(f.good(), "--json {}: cannot open for writing", path);
  f << j.dump(2) << "\n";
  RT_CHECK(f.good(), "--json {}: write failed", path);
}

struct Evaluation {
  EvalResult result;
  CheckpointMeta meta;
};

Evaluation evaluate_checkpoint(const std::string& path, Dataset& data, Communicator& control,
                               const EvalFlags& f, Device device) {
  ModelOptions options;
  options.device = device;
  options.max_batch = f.batch;
  CheckpointModel cm = load_checkpoint_model(path, control, data.sample_shape(), data.num_classes(), options);
  return {evaluate(*cm.model, data, control, f.batch, device), cm.meta};
}

int run_single(const EvalFlags& f, const Topology& topo, Communicator& control, Dataset& data) {
  std::string path = f.ckpt;
  if (std::filesystem::is_directory(path)) {
    auto latest = latest_checkpoint(path);
    RT_CHECK(latest.has_value(), "--ckpt {}: the directory holds no complete checkpoint", path);
    path = *latest;
  }
  Evaluation e = evaluate_checkpoint(path, data, control, f, topo.device());
  if (topo.rank() == 0) {
    std::fputs(format_report(e.result, e.meta.step, path, data.describe(), data.class_names()).c_str(), stdout);
    if (!f.json.empty()) write_json_file(f.json, result_json(e.result, e.meta.step, path, data.class_names()));
  }
  return 0;
}

// Rank 0 decides what to evaluate next and tells everyone: [kind, step] with
// kind 0 = stop, 1 = evaluate path, 2 = nothing new yet.
int run_watch(const EvalFlags& f, const Topology& topo, Communicator& control, Dataset& data) {
  StopSignalHandler stop;
  std::unique_ptr<MetricsLog> metrics;
  std::unique_ptr<TensorBoardWriter> tensorboard;
  if (topo.rank() == 0 && !f.logdir.empty()) {
    metrics = std::make_unique<MetricsLog>(f.logdir + "/eval/metrics.jsonl", std::nullopt);
    tensorboard = std::make_unique<TensorBoardWriter>(f.logdir + "/eval");
  }
  log0("watching {} every {:g}s{}", f.watch, f.interval,
       f.until_step ? fmt::format(" until step {}", f.until_step) : std::string());
  std::set<std::uint64_t> seen;
  std::uint64_t evaluated = 0;
  for (;;) {
    std::vector<std::uint64_t> order{2, 0};
    std::string path;
    if (topo.rank() == 0) {
      if (stop_requested()) {
        order = {0, 0};
      } else {
        for (const auto& [step, p] : list_checkpoints(f.watch)) {
          if (seen.count(step)) continue;
          order = {1, step};
          path = p;
          break;
        }
      }
    }
    control.broadcast(BufferView{order.data(), 2, DType::i64, Device::cpu()},
                      BufferView{order.data(), 2, DType::i64, Device::cpu()}, 0);
    if (order[0] == 0) {
      log0("stopped by {} after {} evaluation(s)", signal_name(stop_signal_number()), evaluated);
      return 0;
    }
    if (order[0] == 2) {
      // Sleep in short slices so a signal ends the watch promptly; all ranks
      // sleep the same interval and meet again in the broadcast above.
      const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(f.interval);
      while (std::chrono::steady_clock::now() < until && !stop_requested())
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      continue;
    }
    const std::uint64_t step = order[1];
    seen.insert(step);
    // Only rank 0 reads the file; the others name it in messages.
    bool finished = false;
    try {
      Evaluation e = evaluate_checkpoint(path.empty() ? f.watch + "/" + checkpoint_file_name(step) : path, data,
                                         control, f, topo.device());
      ++evaluated;
      finished = e.meta.finished;
      if (topo.rank() == 0) {
        log0("step {}: accuracy {:.4f} loss {:.4f} (n={})", step, e.result.accuracy, e.result.loss, e.result.n);
        nlohmann::json j = result_json(e.result, step, path, data.class_names());
        j["kind"] = "eval";
        j["split"] = f.split;
        if (metrics) metrics->write(j);
        if (tensorboard)
          tensorboard->add_scalars(step, {{"eval/accuracy", e.result.accuracy}, {"eval/loss", e.result.loss}});
      }
    } catch (const Error& e) {
      // A corrupt or incompatible checkpoint: every rank got the same Error.
      if (topo.rank() == 0) log_error("skipping checkpoint at step {}: {}", step, e.what());
    }
    if (f.until_step > 0 && step >= f.until_step) {
      log0("reached step {} (--until-step {}): done after {} evaluation(s)", step, f.until_step, evaluated);
      return 0;
    }
    if (finished) {
      log0("the training run marked step {} as its final checkpoint: done after {} evaluation(s)", step, evaluated);
      return 0;
    }
  }
}

int run_eval(const EvalFlags& f, const Topology& topo) {
  CommOptions options;
  // The watcher's ranks wait for rank 0 across a whole polling interval.
  options.timeout_seconds = std::max(f.timeout, 2 * f.interval + 60);
  std::unique_ptr<Communicator> control = make_control_communicator(topo, options);
  Dataset data = Dataset::open_on_all_ranks(f.data, f.split);
  return f.watch.empty() ? run_single(f, topo, *control, data) : run_watch(f, topo, *control, data);
}

CLI::App* add_eval_command(CLI::App& app, CommandContext& ctx) {
  auto f = std::make_shared<EvalFlags>();
  CLI::App* sub = app.add_subcommand(
      "eval", "Evaluate a checkpoint on a split (loss, accuracy, per-class accuracy, confusion matrix), "
              "or watch a checkpoint directory and evaluate each new one");
  sub->footer(
      "Beside a training job:\n"
      "  mpirun -np 4 ringtrain train --data d.h5 --ckpt-dir run/ckpt --ckpt-every 500 --logdir run &\n"
      "  ringtrain eval --watch run/ckpt --data d.h5 --interval 30 --logdir run\n"
      "  tensorboard --logdir run");
  auto* ckpt = sub->add_option("--ckpt", f->ckpt, "Checkpoint file, or a directory (its newest checkpoint)");
  auto* watch = sub->add_option("--watch", f->watch, "Watch this directory and evaluate every new checkpoint once, in step order")
                    ->check(CLI::ExistingDirectory);
  ckpt->excludes(watch);
  sub->add_option("--data", f->data, "HDF5 dataset file")->required()->check(CLI::ExistingFile);
  sub->add_option("--split", f->split, "Split to evaluate (test, val, train)")->capture_default_str();
  sub->add_option("--batch", f->batch, "Samples per forward pass")->check(CLI::Range(1, 65536))->capture_default_str();
  sub->add_option("--json", f->json, "Also write the figures as one JSON object to this file");
  sub->add_option("--interval", f->interval, "--watch: seconds between looks at the directory")
      ->check(CLI::Range(0.1, 86400.0))
      ->capture_default_str();
  sub->add_option("--logdir", f->logdir, "--watch: append results to LOGDIR/eval/metrics.jsonl and TensorBoard events in LOGDIR/eval");
  sub->add_option("--until-step", f->until_step, "--watch: stop after evaluating a checkpoint at or past this step");
  sub->add_option("--timeout", f->timeout, "Seconds a collective may wait before the job aborts")->capture_default_str();
  add_device_options(sub, ctx, "cpu");
  sub->parse_complete_callback([f, &ctx] {
    RT_CHECK(!f->ckpt.empty() || !f->watch.empty(), "eval: give --ckpt PATH|DIR or --watch DIR");
    RT_CHECK(f->json.empty() || f->watch.empty(), "--json applies to a single checkpoint, not to --watch (use --logdir)");
    ctx.action = [f](const Topology& topo) { return run_eval(*f, topo); };
  });
  return sub;
}

}  // namespace
}  // namespace ringtrain::apps

RINGTRAIN_REGISTER_COMMAND("", "eval", 20, ringtrain::apps::add_eval_command)
