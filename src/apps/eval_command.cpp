// `ringtrain eval`: evaluate a checkpoint (or every new one, with --watch) on a
// split, alone or under mpirun with the split sharded exactly as in training.
// Defaults to --device cpu so that it never takes a training GPU.
#include <chrono>
#include <filesystem>
#include <fstream>
#include <limits>
#include <optional>
#include <set>
#include <thread>

#include <nlohmann/json.hpp>

#include "apps/command.h"
#include "apps/eval_transform_choice.h"
#include "comm/broadcast_text.h"
#include "ringtrain/comm/control_channel.h"
#include "ringtrain/core/check.h"
#include "ringtrain/core/log.h"
#include "ringtrain/data/dataset.h"
#include "ringtrain/data/output_guard.h"
#include "ringtrain/model/plugin.h"
#include "ringtrain/model/presets.h"
#include "ringtrain/train/checkpoint.h"
#include "ringtrain/train/checkpoint_loader.h"
#include "ringtrain/train/evaluator.h"
#include "ringtrain/train/metrics_log.h"
#include "ringtrain/train/stop_signal.h"
#include "ringtrain/train/tensorboard_writer.h"

namespace ringtrain::apps {
namespace {

struct EvalFlags {
  std::vector<std::string> plugins;
  std::string ckpt;
  std::string data;
  std::string split = "test";
  std::size_t batch = 256;
  std::string json;
  bool force = false;
  std::string watch;
  double interval = 30;
  std::string logdir;
  std::uint64_t until_step = 0;
  double timeout = 300;
  std::string eval_transform;
  std::string precision = "fp32";
  std::string layout = "auto";
  std::size_t loader_threads = 1;
};

nlohmann::json result_json(const EvalResult& r, std::uint64_t step, const std::string& path,
                           const std::vector<std::string>& class_names) {
  if (r.tokens > 0)
    return {{"checkpoint", path},    {"step", step},   {"n", r.n},
            {"tokens", r.tokens},    {"loss", r.loss}, {"perplexity", r.perplexity},
            {"accuracy", r.accuracy}};
  nlohmann::json per_class = nlohmann::json::array();
  const auto acc = r.per_class_accuracy();
  for (std::size_t k = 0; k < acc.size(); ++k) {
    std::uint64_t support = 0;
    for (int p = 0; p < r.num_classes; ++p)
      support +=
          r.confusion[k * static_cast<std::size_t>(r.num_classes) + static_cast<std::size_t>(p)];
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
  return {{"checkpoint", path},    {"step", step},           {"n", r.n},
          {"loss", r.loss},        {"accuracy", r.accuracy}, {"per_class", per_class},
          {"confusion", confusion}};
}

std::string format_report(const EvalResult& r, std::uint64_t step, const std::string& path,
                          const std::string& split, const std::vector<std::string>& names) {
  if (r.tokens > 0)
    return fmt::format(
        "checkpoint {} (step {}), split {}: n={} windows, tokens={} loss={:.6f} per token "
        "perplexity={:.4f} accuracy={:.4f} (next token)\n",
        path, step, split, r.n, r.tokens, r.loss, r.perplexity, r.accuracy);
  std::string out =
      fmt::format("checkpoint {} (step {}), split {}: n={} loss={:.4f} accuracy={:.4f}\n", path,
                  step, split, r.n, r.loss, r.accuracy);
  const auto acc = r.per_class_accuracy();
  std::size_t w = 5;
  for (const auto& n : names) w = std::max(w, n.size());
  out += "per-class accuracy:\n";
  for (std::size_t k = 0; k < acc.size(); ++k)
    out += fmt::format("  {:>3} {:<{}}  {:.4f}\n", k, k < names.size() ? names[k] : std::string(),
                       w, acc[k]);
  out += "confusion matrix (rows: true class, columns: predicted):\n      ";
  for (int p = 0; p < r.num_classes; ++p) out += fmt::format("{:>6}", p);
  out += "\n";
  for (int t = 0; t < r.num_classes; ++t) {
    out += fmt::format("  {:>3} ", t);
    for (int p = 0; p < r.num_classes; ++p)
      out += fmt::format("{:>6}", r.confusion[static_cast<std::size_t>(t * r.num_classes + p)]);
    out += "\n";
  }
  return out;
}

void write_json_file(const std::string& path, const nlohmann::json& j) {
  write_output_text(path, j.dump(2) + "\n", "--json");
}

struct Evaluation {
  EvalResult result;
  CheckpointMeta meta;
};

// Token data: windows of the checkpoint's context, the partial last one kept
// (every token of the split is predicted once). Rank 0 reads the model spec
// and every rank takes it, or rank 0's error. Returns the model's classes
// (a fixed vocabulary, gpt2's, else the data's).
int use_checkpoint_context(const std::string& path, Dataset& data, Communicator& control) {
  std::string text;
  if (control.rank() == 0) {
    try {
      text = "spec:" + read_checkpoint(path).meta.model_spec;
    } catch (const Error& e) {
      text = std::string("error:") + e.what();
    }
  }
  text = broadcast_text(control, text, 0);
  RT_CHECK(text.rfind("spec:", 0) == 0, "{}", text.substr(text.find(':') + 1));
  const ModelSpec spec = ModelSpec::parse(text.substr(5));
  const auto lm = language_model_shape(spec.preset);
  const std::size_t context = lm                             ? lm->context
                              : spec.input_shape.size() == 1 ? spec.input_shape[0]
                                                             : 0;
  RT_CHECK(context > 0, "{} holds tokens but checkpoint {}'s model '{}' fixes no context",
           data.describe(), path, spec.describe());
  data.set_token_context(context, /*keep_partial=*/true);
  RT_CHECK(data.size() > 0, "{}: {} token(s): nothing to evaluate", data.describe(),
           data.token_count());
  return lm && lm->vocab > 0 ? static_cast<int>(lm->vocab) : data.num_classes();
}

Evaluation evaluate_checkpoint(const std::string& path, Dataset& data, Communicator& control,
                               const EvalFlags& f, Device device) {
  ModelOptions options;
  options.device = device;
  options.max_batch = f.batch;
  options.precision = parse_precision(f.precision);
  options.layout = parse_layout_choice(f.layout);
  int classes = data.num_classes();
  if (data.is_tokens()) classes = use_checkpoint_context(path, data, control);
  CheckpointModel cm = load_checkpoint_model(path, control, data.sample_shape(), classes, options);
  return {evaluate(*cm.model, data, control, f.batch, device), cm.meta};
}

int run_single(const EvalFlags& f, const Topology& topo, Communicator& control, Dataset& data) {
  std::string path = f.ckpt;
  if (std::filesystem::is_directory(path)) {
    // Rank 0 picks the newest checkpoint that reads, as `train --resume
    // latest` does (a damaged newest file is skipped with a warning), and
    // every rank takes its choice or its error.
    std::string chosen, error;
    if (topo.rank() == 0) {
      try {
        chosen = newest_intact_checkpoint_path(path, "--ckpt");
      } catch (const Error& e) {
        error = e.what();
      }
    }
    error = broadcast_text(control, error, 0);
    if (!error.empty()) throw Error(error);
    path = broadcast_text(control, chosen, 0);
  }
  use_eval_transform(data, f.eval_transform, path, f.loader_threads);
  Evaluation e = evaluate_checkpoint(path, data, control, f, topo.device());
  if (topo.rank() == 0) {
    std::fputs(
        format_report(e.result, e.meta.step, path, data.describe(), data.class_names()).c_str(),
        stdout);
    if (!f.json.empty())
      write_json_file(f.json, result_json(e.result, e.meta.step, path, data.class_names()));
  }
  return 0;
}

// What an earlier watcher on the same --logdir already evaluated (its records
// of this split in LOGDIR/eval/metrics.jsonl), so that a restarted watcher
// appends to the history instead of repeating it.
struct EvaluatedBefore {
  std::set<std::uint64_t> steps;
  std::optional<std::uint64_t> finished_step;  // a record of the run's final checkpoint
};

EvaluatedBefore read_evaluated_before(const std::string& path, const std::string& split) {
  EvaluatedBefore out;
  std::ifstream in(path);
  std::string line;
  auto is_string = [](const nlohmann::json& r, const char* key, const std::string& value) {
    const auto it = r.find(key);
    return it != r.end() && it->is_string() && it->get<std::string>() == value;
  };
  while (std::getline(in, line)) {
    const nlohmann::json r = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (r.is_discarded() || !r.is_object() || !is_string(r, "kind", "eval") ||
        !is_string(r, "split", split))
      continue;
    const auto step = metrics_record_step(r);
    if (!step) continue;
    out.steps.insert(*step);
    // Only the newest record counts: a resumed run may have gone on after it.
    const auto finished = r.find("finished");
    const bool is_final = finished != r.end() && finished->is_boolean() && finished->get<bool>();
    if (*step == *out.steps.rbegin()) out.finished_step = is_final ? step : std::nullopt;
  }
  return out;
}

// Rank 0 decides what happens next and tells every rank.
enum WatchOrder : std::uint64_t {
  kStopBySignal = 0,
  kEvaluate = 1,
  kNothingNew = 2,
  kAlreadyFinished = 3,
  kCannotList = 4,
};

int run_watch(const EvalFlags& f, const Topology& topo, Communicator& control, Dataset& data) {
  // Installed before MPI starts (main.cpp) for --watch, so a SIGUSR1 that
  // ringtrain-mpirun forwards early is a stop request, not the default
  // action (termination); here when a program calls this directly.
  std::optional<StopSignalHandler> stop;
  if (!stop_handler_installed()) stop.emplace();
  std::unique_ptr<MetricsLog> metrics;
  std::unique_ptr<TensorBoardWriter> tensorboard;
  std::set<std::uint64_t> seen;
  std::optional<std::uint64_t> finished_before;
  if (topo.rank() == 0 && !f.logdir.empty()) {
    const std::string metrics_path = f.logdir + "/eval/metrics.jsonl";
    EvaluatedBefore before = read_evaluated_before(metrics_path, f.split);
    if (!before.steps.empty())
      log0(
          "{} already holds {} evaluation(s) of split {} (newest step {}): those checkpoints are "
          "not evaluated again",
          metrics_path, before.steps.size(), f.split, *before.steps.rbegin());
    seen = std::move(before.steps);
    finished_before = before.finished_step;
    // Keep every earlier record (and drop a partial last line), then append.
    metrics = std::make_unique<MetricsLog>(metrics_path, std::numeric_limits<std::uint64_t>::max());
    tensorboard = std::make_unique<TensorBoardWriter>(f.logdir + "/eval");
  }
  log0("watching {} every {:g}s{}", f.watch, f.interval,
       f.until_step ? fmt::format(" until step {}", f.until_step) : std::string());
  if (topo.rank() == 0 && !std::filesystem::exists(f.watch))
    log0("{} does not exist yet: waiting for the training run's first checkpoint", f.watch);
  // The newest step evaluated (or tried): anything older that shows up later is
  // skipped, so results always come in step order.
  std::optional<std::uint64_t> newest;
  if (!seen.empty()) newest = *seen.rbegin();
  std::uint64_t evaluated = 0;
  for (;;) {
    std::vector<std::uint64_t> order{kNothingNew, 0};
    std::string path;
    if (topo.rank() == 0) {
      if (stop_requested()) {
        order = {kStopBySignal, 0};
      } else if (finished_before) {
        order = {kAlreadyFinished, *finished_before};
      } else {
        try {
          for (const auto& [step, p] : list_checkpoints(f.watch)) {
            if (seen.count(step)) continue;
            if (newest && step < *newest) {
              log_warn(
                  "skipping {}: older than step {}, which was already evaluated (results stay "
                  "in step order)",
                  p, *newest);
              seen.insert(step);
              continue;
            }
            order = {kEvaluate, step};
            path = p;
            break;
          }
        } catch (const Error& e) {
          log_error("{}", e.what());
          order = {kCannotList, 0};
        }
      }
    }
    control.broadcast(BufferView{order.data(), 2, DType::i64, Device::cpu()},
                      BufferView{order.data(), 2, DType::i64, Device::cpu()}, 0);
    if (order[0] == kStopBySignal) {
      log0("stopped by {} after {} evaluation(s)", stop_reason(stop_signal_number()), evaluated);
      return 0;
    }
    if (order[0] == kAlreadyFinished) {
      log0(
          "the training run's final checkpoint (step {}) was already evaluated (see "
          "{}/eval/metrics.jsonl): nothing to watch",
          order[1], f.logdir);
      return 0;
    }
    RT_CHECK(order[0] != kCannotList,
             "--watch {}: cannot list the directory (see rank 0's message)", f.watch);
    if (order[0] == kNothingNew) {
      // Sleep in short slices so a signal ends the watch promptly; all ranks
      // sleep the same interval and meet again in the broadcast above.
      const auto until =
          std::chrono::steady_clock::now() + std::chrono::duration<double>(f.interval);
      while (std::chrono::steady_clock::now() < until && !stop_requested())
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      continue;
    }
    const std::uint64_t step = order[1];
    seen.insert(step);
    newest = step;
    // Only rank 0 reads the file (the path it listed); the others name it in messages.
    if (path.empty()) path = (std::filesystem::path(f.watch) / checkpoint_file_name(step)).string();
    bool finished = false;
    try {
      Evaluation e = evaluate_checkpoint(path, data, control, f, topo.device());
      ++evaluated;
      finished = e.meta.finished;
      if (topo.rank() == 0) {
        log0("step {}: accuracy {:.4f} loss {:.4f} (n={}){}", step, e.result.accuracy,
             e.result.loss, e.result.n, finished ? ", the run's final checkpoint" : "");
        nlohmann::json j = result_json(e.result, step, path, data.class_names());
        j["kind"] = "eval";
        j["split"] = f.split;
        j["finished"] = finished;
        if (metrics) metrics->write(j);
        if (tensorboard)
          tensorboard->add_scalars(
              step, {{"eval/accuracy", e.result.accuracy}, {"eval/loss", e.result.loss}});
      }
    } catch (const Error& e) {
      // A corrupt or incompatible checkpoint (or one pruned before we read
      // it): every rank got the same Error, so all go on watching together.
      if (topo.rank() == 0) log_error("skipping checkpoint {} (step {}): {}", path, step, e.what());
    }
    if (f.until_step > 0 && step >= f.until_step) {
      log0("reached step {} (--until-step {}): done after {} evaluation(s)", step, f.until_step,
           evaluated);
      return 0;
    }
    if (finished) {
      log0("the training run marked step {} as its final checkpoint: done after {} evaluation(s)",
           step, evaluated);
      return 0;
    }
  }
}

int run_eval(const EvalFlags& f, const Topology& topo) {
  CommOptions options;
  // The watcher's ranks wait for rank 0 across a whole polling interval.
  options.timeout_seconds = std::max(f.timeout, 2 * f.interval + 60);
  std::unique_ptr<Communicator> control = make_control_communicator(topo, options);
  Dataset data = Dataset::open_on_all_ranks(f.data, f.split, *control);
  // An accuracy over no samples would read as 0.0000: say what is wrong instead.
  RT_CHECK(data.size() > 0 || data.token_count() > 1,
           "--split {}: {} is empty: there is nothing to evaluate", f.split, data.describe());
  // A watcher applies --eval-transform only: checkpoints that do not exist yet
  // cannot say how they were trained.
  if (!f.watch.empty()) use_eval_transform(data, f.eval_transform, "", f.loader_threads);
  return f.watch.empty() ? run_single(f, topo, *control, data) : run_watch(f, topo, *control, data);
}

CLI::App* add_eval_command(CLI::App& app, CommandContext& ctx) {
  auto f = std::make_shared<EvalFlags>();
  CLI::App* sub = app.add_subcommand(
      "eval",
      "Evaluate a checkpoint on a split (loss, accuracy, per-class accuracy, confusion matrix), "
      "or watch a checkpoint directory and evaluate each new one");
  sub->footer(
      "Beside a training job:\n"
      "  mpirun -np 4 ringtrain train --data d.h5 --ckpt-dir run/ckpt --ckpt-every 500 \\\n"
      "      --logdir run &\n"
      "  ringtrain eval --watch run/ckpt --data d.h5 --interval 30 --logdir run\n"
      "  tensorboard --logdir run");
  auto* ckpt =
      sub->add_option("--ckpt", f->ckpt, "Checkpoint file, or a directory (its newest checkpoint)");
  // The directory may not exist yet: a watcher started beside a fresh
  // training run waits for the run's first checkpoint.
  auto* watch = sub->add_option(
      "--watch", f->watch,
      "Watch this checkpoint directory (it may not exist yet) and evaluate every new checkpoint "
      "once, in step order; stops at --until-step, at the run's final checkpoint, or on "
      "SIGINT/SIGTERM");
  ckpt->excludes(watch);
  sub->add_option("--data", f->data, "HDF5 dataset file")->required()->check(CLI::ExistingFile);
  sub->add_option("--split", f->split, "Split to evaluate (test, val, train)")
      ->capture_default_str();
  sub->add_option("--batch", f->batch, "Samples per forward pass")
      ->check(CLI::Range(1, 65536))
      ->capture_default_str();
  sub->add_option("--json", f->json,
                  "Also write the figures as one JSON object to this file (an existing file "
                  "is refused unless --force)");
  sub->add_flag("--force", f->force, "Replace an existing --json file");
  sub->add_option("--interval", f->interval, "--watch: seconds between looks at the directory")
      ->check(CLI::Range(0.1, 86400.0))
      ->capture_default_str();
  sub->add_option(
      "--logdir", f->logdir,
      "--watch: append results to LOGDIR/eval/metrics.jsonl and TensorBoard events in LOGDIR/eval");
  sub->add_option("--until-step", f->until_step,
                  "--watch: stop after evaluating a checkpoint at or past this step");
  add_precision_option(sub, f->precision);
  add_layout_option(sub, f->layout);
  sub->add_option("--eval-transform", f->eval_transform,
                  "Transform of the split's images (default: the one the checkpoint's training "
                  "run used, from its --augment)");
  sub->add_option("--loader-threads", f->loader_threads, "Decode/transform threads per rank")
      ->check(CLI::Range(1, 256))
      ->capture_default_str();
  sub->add_option("--timeout", f->timeout, "Seconds a collective may wait before the job aborts")
      ->capture_default_str();
  sub->add_option("--plugin", f->plugins,
                  "Shared library of layer types the checkpoint's model uses (repeatable)");
  add_device_options(sub, ctx, "cpu");
  sub->parse_complete_callback([f, &ctx] {
    load_layer_plugins(f->plugins);
    RT_CHECK(!f->ckpt.empty() || !f->watch.empty(), "eval: give --ckpt PATH|DIR or --watch DIR");
    RT_CHECK(f->json.empty() || f->watch.empty(),
             "--json applies to a single checkpoint, not to --watch (use --logdir)");
    // Before any work: an evaluation must not end by losing an earlier result.
    if (!f->json.empty())
      guard_output(f->json, {{"--ckpt", f->ckpt}, {"--data", f->data}}, f->force, "--json");
    RT_CHECK(f->watch.empty() || !std::filesystem::exists(f->watch) ||
                 std::filesystem::is_directory(f->watch),
             "--watch {}: not a directory", f->watch);
    RT_CHECK(!f->watch.empty() || (f->logdir.empty() && f->until_step == 0),
             "--logdir and --until-step apply to --watch only");
    ctx.stop_signals_from_start = !f->watch.empty();
    ctx.action = [f](const Topology& topo) { return run_eval(*f, topo); };
  });
  return sub;
}

}  // namespace
}  // namespace ringtrain::apps

RINGTRAIN_REGISTER_COMMAND("", "eval", 20, ringtrain::apps::add_eval_command)
