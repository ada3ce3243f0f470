// `ringtrain weights export|import`: a model's weights as safetensors, with the
// presets' torchvision names, so that weights travel between ringtrain and
// PyTorch both ways. One-process tools.
#include <filesystem>
#include <memory>
#include <string>

#include <fmt/format.h>

#include "apps/command.h"
#include "ringtrain/core/buffer_copy.h"
#include "ringtrain/core/check.h"
#include "ringtrain/core/log.h"
#include "ringtrain/data/dataset.h"
#include "ringtrain/data/output_guard.h"
#include "ringtrain/model/hf_gpt2_names.h"
#include "ringtrain/model/model.h"
#include "ringtrain/model/presets.h"
#include "ringtrain/model/safetensors.h"
#include "ringtrain/model/weights_io.h"
#include "ringtrain/train/checkpoint.h"

namespace ringtrain::apps {

namespace {

namespace fs = std::filesystem;

struct ExportOptions {
  std::string ckpt, output;
  std::string names = "ringtrain";  // or hf-gpt2
  bool force = false;
};
struct ImportOptions {
  std::string input_file, model, output_dir, input = "1,28,28";
  int classes = 10;
  bool force = false;
  bool input_given = false;
};

int run_export(const ExportOptions& o, const Topology& topo) {
  if (topo.rank() != 0) return 0;
  // A directory means its newest checkpoint that reads, as for eval, predict
  // and generate (a damaged newest file is skipped with a warning).
  const std::string path =
      fs::is_directory(o.ckpt) ? newest_intact_checkpoint_path(o.ckpt, "--ckpt") : o.ckpt;
  guard_output(o.output, {{"--ckpt", path}}, o.force, "-o");
  const LoadedCheckpoint ck = read_checkpoint(path);
  std::vector<NamedTensor> tensors;
  std::vector<std::pair<std::string, std::int64_t>> counters;
  for (std::size_t i = 0; i < ck.params.size(); ++i)
    tensors.push_back({ck.params[i].first, ck.param_shapes[i], ck.params[i].second, "F32"});
  const std::string mean = ".running_mean";
  for (std::size_t i = 0; i < ck.buffers.size(); ++i) {
    const std::string& name = ck.buffers[i].first;
    tensors.push_back({name, ck.buffer_shapes[i], ck.buffers[i].second, "F32"});
    // PyTorch's BatchNorm keeps a step counter beside its statistics.
    if (name.size() > mean.size() && name.ends_with(mean))
      counters.emplace_back(name.substr(0, name.size() - mean.size()) + ".num_batches_tracked",
                            static_cast<std::int64_t>(ck.meta.step));
  }
  if (o.names == "hf-gpt2") tensors = to_hf_gpt2_names(tensors);
  write_safetensors(o.output, tensors, counters);
  log0("wrote {}: {} tensors of model '{}' at step {}", o.output, tensors.size() + counters.size(),
       ck.meta.model_spec, ck.meta.step);
  return 0;
}

int run_import(const ImportOptions& o, const Topology& topo) {
  if (topo.rank() != 0) return 0;
  const std::string target = (fs::path(o.output_dir) / "ckpt-0.h5").string();
  guard_output(target, {{"file", o.input_file}}, o.force, "-o");
  ModelOptions mo;
  mo.device = Device::cpu();
  mo.max_batch = 1;
  const ModelSpec spec = ModelSpec::parse(o.model);
  // A language-model preset fixes its context (gpt2 its vocabulary too).
  std::string input = o.input;
  int classes = o.classes;
  if (const auto lm = language_model_shape(spec.preset)) {
    if (!o.input_given) input = std::to_string(lm->context);
    if (lm->vocab > 0) classes = static_cast<int>(lm->vocab);
  }
  auto model = Model::build(spec, parse_shape(input, "--input"), classes, mo);
  import_weights(*model, read_safetensors(o.input_file), o.input_file);
  std::vector<float> params(model->param_count()), buffers(model->buffer_count());
  copy_view(view_of(params.data(), params.size()), model->params());
  if (!buffers.empty()) copy_view(view_of(buffers.data(), buffers.size()), model->buffers());
  std::vector<TensorRecord> p, b;
  for (const ParamInfo& i : model->param_info())
    p.push_back({i.name, i.shape, params.data() + i.offset, i.count});
  for (const ParamInfo& i : model->buffer_info())
    b.push_back({i.name, i.shape, buffers.data() + i.offset, i.count});
  CheckpointMeta meta;
  meta.world_size = 1;
  meta.rng_state = {0};
  meta.model_spec = spec.to_string();
  meta.model_hash = spec.hash();
  meta.config_json = fmt::format(R"({{"imported_from":"{}"}})", o.input_file);
  const std::string path = write_checkpoint_atomic(o.output_dir, meta, p, {}, 0, b);
  log0("wrote {}: model '{}', {} parameters and {} state values from {}", path, meta.model_spec,
       model->param_count(), model->buffer_count(), o.input_file);
  return 0;
}

CLI::App* add_weights(CLI::App& app, CommandContext&) {
  CLI::App* sub =
      app.add_subcommand("weights", "Weights in and out as safetensors (torchvision's names)");
  sub->require_subcommand(1);
  return sub;
}

CLI::App* add_weights_export(CLI::App& parent, CommandContext& ctx) {
  auto o = std::make_shared<ExportOptions>();
  CLI::App* sub = parent.add_subcommand(
      "export", "A checkpoint's parameters and BatchNorm state as a safetensors file");
  sub->add_option("--ckpt", o->ckpt,
                  "Checkpoint file (ckpt-<step>.h5), or a --ckpt-dir (its newest checkpoint)")
      ->required();
  sub->add_option("-o,--output", o->output, "Output .safetensors file")->required();
  sub->add_option("--names", o->names,
                  "Tensor names: ringtrain's (torchvision's for the image presets), or hf-gpt2 "
                  "(Hugging Face GPT-2's for the gpt presets: transformer.h.0.attn.c_attn.weight, "
                  "Conv1D weights transposed, lm_head.weight)")
      ->check(CLI::IsMember({"ringtrain", "hf-gpt2"}))
      ->capture_default_str();
  sub->add_flag("--force", o->force, "Replace an existing output");
  sub->parse_complete_callback([&ctx, o] {
    ctx.topology.device = DeviceRequest::cpu;
    ctx.action = [o](const Topology& t) { return run_export(*o, t); };
  });
  return sub;
}

CLI::App* add_weights_import(CLI::App& parent, CommandContext& ctx) {
  auto o = std::make_shared<ImportOptions>();
  CLI::App* sub = parent.add_subcommand(
      "import",
      "A safetensors file as a step-0 checkpoint of a model (for eval and predict; train "
      "--init-from FILE fine-tunes from it)");
  sub->add_option("file", o->input_file,
                  "The .safetensors file (Hugging Face GPT-2 names are recognised)")
      ->required();
  sub->add_option("--model", o->model, "The model the weights are for (e.g. resnet18)")->required();
  CLI::Option* input =
      sub->add_option("--input", o->input,
                      "Per-sample input shape C,H,W or F (a gpt preset: its context)")
          ->capture_default_str();
  sub->add_option("--classes", o->classes, "Number of classes")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  sub->add_option("-o,--output", o->output_dir, "Checkpoint directory (gets ckpt-0.h5)")
      ->required();
  sub->add_flag("--force", o->force, "Replace an existing ckpt-0.h5");
  sub->parse_complete_callback([&ctx, o, input] {
    o->input_given = input->count() > 0;
    ctx.topology.device = DeviceRequest::cpu;
    ctx.action = [o](const Topology& t) { return run_import(*o, t); };
  });
  return sub;
}

}  // namespace
}  // namespace ringtrain::apps

RINGTRAIN_REGISTER_COMMAND("", "weights", 46, ringtrain::apps::add_weights)
RINGTRAIN_REGISTER_COMMAND("weights", "export", 10, ringtrain::apps::add_weights_export)
RINGTRAIN_REGISTER_COMMAND("weights", "import", 20, ringtrain::apps::add_weights_import)
