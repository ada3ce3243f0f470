// `ringtrain predict`: per-sample predictions of a checkpoint on a split, as
// CSV: index, predicted class, its probability, and the true label.
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "apps/command.h"
#include "ringtrain/comm/control_channel.h"
#include "ringtrain/core/buffer_copy.h"
#include "ringtrain/core/check.h"
#include "ringtrain/core/log.h"
#include "ringtrain/data/dataset.h"
#include "ringtrain/data/output_guard.h"
#include "ringtrain/data/prefetcher.h"
#include "ringtrain/model/plugin.h"
#include "ringtrain/tensor/device_memory.h"
#include "ringtrain/train/checkpoint.h"
#include "ringtrain/train/checkpoint_loader.h"

namespace ringtrain::apps {
namespace {

struct PredictFlags {
  std::string ckpt, data, split = "test", out;
  std::size_t batch = 256;
  bool logits = false;  // also every class's logit
  std::vector<std::string> plugins;
  bool force = false;
};

int run_predict(const PredictFlags& f, const Topology& topo) {
  RT_CHECK(topo.world_size() == 1,
           "predict runs on one rank (it writes one file); start it without mpirun or with -np 1, "
           "not {}",
           topo.world_size());
  guard_output(f.out, {{"--data", f.data}, {"--ckpt", f.ckpt}}, f.force, "-o");
  std::unique_ptr<Communicator> control = make_control_communicator(topo);
  // Predictions need no labels: data nobody has labelled is what they are for.
  Dataset data = Dataset::open_on_all_ranks(f.data, f.split, *control, Dataset::Labels::optional);
  std::string path = f.ckpt;
  // The newest checkpoint that reads (a damaged newest file is skipped with a
  // warning, as `train --resume latest` does).
  if (std::filesystem::is_directory(path)) path = newest_intact_checkpoint_path(path, "--ckpt");
  ModelOptions options;
  options.device = topo.device();
  options.max_batch = f.batch;
  CheckpointModel cm =
      load_checkpoint_model(path, *control, data.sample_shape(), data.num_classes(), options);
  Model& model = *cm.model;

  // A temporary name, renamed at the end: an interrupted run leaves no
  // half-written file under the name asked for.
  const std::string tmp = fmt::format("{}.tmp-{}", f.out, static_cast<long>(::getpid()));
  std::ofstream out(tmp);
  RT_CHECK(out.good(), "-o {}: cannot open {} for writing", f.out, tmp);
  const auto nc = static_cast<std::size_t>(data.num_classes());
  out << "index,predicted,probability,label";
  if (f.logits)
    for (std::size_t k = 0; k < nc; ++k) out << ",logit_" << k;
  out << '\n';
  EvalBatches batches(data, eval_shard(data.size(), 0, 1), f.batch, 2, topo.device());
  std::vector<float> logits;
  std::vector<std::int32_t> labels;
  std::uint64_t index = 0;
  while (auto b = batches.next()) {
    model.forward(b->x.as<const float>(), b->y.as<const std::int32_t>(), b->size,
                  /*training=*/false);
    model.synchronize();
    logits.resize(b->size * nc);
    labels.resize(b->size);
    copy_view(view_of(logits.data(), logits.size()),
              view_of(model.logits(), logits.size(), topo.device()));
    copy_view(view_of(labels.data(), labels.size()), b->y.slice(0, b->size));
    for (std::size_t i = 0; i < b->size; ++i, ++index) {
      const float* row = logits.data() + i * nc;
      std::size_t best = 0;
      for (std::size_t k = 1; k < nc; ++k)
        if (row[k] > row[best]) best = k;
      // Softmax probability of the winner, computed stably from the logits.
      double denom = 0;
      for (std::size_t k = 0; k < nc; ++k)
        denom += std::exp(static_cast<double>(row[k] - row[best]));
      out << index << ',' << best << ',' << fmt::format("{:.6f}", 1.0 / denom) << ',';
      if (data.has_labels()) out << labels[i];  // else the label column stays empty
      if (f.logits)
        for (std::size_t k = 0; k < nc; ++k) out << ',' << fmt::format("{:.9g}", row[k]);
      out << '\n';
    }
  }
  out.close();
  if (!out) std::filesystem::remove(tmp);
  RT_CHECK(static_cast<bool>(out), "-o {}: write failed", f.out);
  std::error_code ec;
  std::filesystem::rename(tmp, f.out, ec);
  RT_CHECK(!ec, "-o {}: cannot rename {} to it: {}", f.out, tmp, ec.message());
  log0("wrote {} predictions of {} (step {}) on {}{} to {}", index, path, cm.meta.step,
       data.describe(), data.has_labels() ? "" : " (no labels: the label column is empty)", f.out);
  return 0;
}

CLI::App* add_predict_command(CLI::App& app, CommandContext& ctx) {
  auto f = std::make_shared<PredictFlags>();
  CLI::App* sub = app.add_subcommand("predict",
                                     "Write per-sample predictions of a checkpoint as CSV "
                                     "(index, predicted, probability, label; data without "
                                     "labels leaves the label column empty)");
  sub->add_option("--ckpt", f->ckpt, "Checkpoint file, or a directory (its newest checkpoint)")
      ->required();
  sub->add_option("--data", f->data, "HDF5 dataset file")->required()->check(CLI::ExistingFile);
  sub->add_option("--split", f->split, "Split to predict")->capture_default_str();
  sub->add_option("-o,--out", f->out, "CSV file to write")->required();
  sub->add_flag("--force", f->force, "Replace an existing -o file");
  sub->add_flag("--logits", f->logits,
                "Also write each sample's logits (columns logit_0 ... logit_<classes-1>)");
  sub->add_option("--batch", f->batch, "Samples per forward pass")
      ->check(CLI::Range(1, 65536))
      ->capture_default_str();
  sub->add_option("--plugin", f->plugins,
                  "Shared library of layer types the checkpoint's model uses (repeatable)");
  add_device_options(sub, ctx, "cpu");
  sub->parse_complete_callback([f, &ctx] {
    load_layer_plugins(f->plugins);
    ctx.action = [f](const Topology& topo) { return run_predict(*f, topo); };
  });
  return sub;
}

}  // namespace
}  // namespace ringtrain::apps

RINGTRAIN_REGISTER_COMMAND("", "predict", 30, ringtrain::apps::add_predict_command)
