// `ringtrain model show`: what a model spec builds, as a user checks it before a
// run (Keras' summary(), torchinfo): every node with its inputs, output shape and
// parameters; totals; non-trainable state; activation memory; gradient buckets.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include <memory>
#include <string>

#include "apps/command.h"
#include "ringtrain/data/dataset.h"
#include "ringtrain/model/model.h"
#include "ringtrain/model/presets.h"
#include "ringtrain/ops/precision.h"
#include "ringtrain/optim/optimizer.h"
#include "ringtrain/sync/bucket_plan.h"
#include "ringtrain/sync/zero_layout.h"
#include "ringtrain/train/train_config.h"

namespace ringtrain::apps {

namespace {

struct ShowOptions {
  std::string model;
  std::string input = "1,28,28";
  int classes = 10;
  std::size_t batch = 1;
  double bucket_mb = kDefaultBucketMb;  // train's
  bool json = false;
  std::string precision = "fp32";  // what the plan stores activations in, as for train
  std::string fuse = "on";         // fused BatchNorm + (add +) ReLU, as for train
  // The optimizer-state figure: which optimizer, over how many ranks, sharded or not.
  OptimizerConfig optimizer;
  int world = 1;
  int zero = 0;
  bool text = false;
  bool input_given = false, classes_given = false;
};

std::string shape_text(const std::vector<std::size_t>& s) {
  return fmt::format("[{}]", fmt::join(s, ", "));
}

// The graph in the model language, one node per line: blocks and repeats
// expanded, a preset written out for --classes, to copy and edit.
std::string graph_text(const ModelSpec& given, int classes) {
  ModelSpec spec =
      given.preset.empty() ? given : graph_preset(given.preset, static_cast<std::size_t>(classes));
  spec.preset.clear();
  std::string s;
  if (!spec.input_shape.empty()) s = fmt::format("input({})\n", fmt::join(spec.input_shape, ", "));
  for (const LayerSpec& l : spec.layers) s += l.to_string() + "\n";
  return s;
}

int run_show(const ShowOptions& o, const Topology& topo) {
  if (topo.rank() != 0) return 0;
  if (o.text) {
    const ModelSpec spec = ModelSpec::parse(o.model);
    // Built first, so that a spec that does not build is refused here too.
    ModelOptions mo;
    mo.device = Device::cpu();
    mo.max_batch = 1;
    (void)Model::build(spec, parse_shape(o.input, "--input"), o.classes, mo);
    std::fputs(graph_text(spec, o.classes).c_str(), stdout);
    return 0;
  }
  ModelOptions mo;
  mo.device = Device::cpu();
  mo.max_batch = o.batch;
  mo.precision = parse_precision(o.precision);
  mo.fuse = o.fuse == "on";
  const ModelSpec spec = ModelSpec::parse(o.model);
  // A language-model preset fixes its context (gpt2 its vocabulary too): no
  // data flags needed. gpt-nano takes its vocabulary from the data: bytes here.
  std::string input = o.input;
  int classes = o.classes;
  if (const auto lm = language_model_shape(spec.preset)) {
    if (!o.input_given) input = std::to_string(lm->context);
    if (!o.classes_given || lm->vocab > 0)
      classes = lm->vocab > 0 ? static_cast<int>(lm->vocab) : 256;
  }
  const auto m = Model::build(spec, parse_shape(input, "--input"), classes, mo);
  std::vector<std::pair<std::size_t, std::size_t>> ranges;
  for (std::size_t i = 0; i < m->layer_count(); ++i) {
    const auto [b, e] = m->layer_param_range(i);
    ranges.emplace_back(b, e - b);  // (offset, count)
  }
  const BucketPlan plan(ranges, sizeof(float),
                        static_cast<std::size_t>(o.bucket_mb * 1024.0 * 1024.0));
  const std::size_t act = m->activation_bytes_per_sample();
  const std::size_t workspace = m->workspace_bytes_per_sample();
  // The linear -> gelu_tanh pairs a GPU's plan runs as one cuBLASLt GEMM (the
  // GELU epilogue, under bf16/fp16 and --fuse on); this CPU plan keeps them
  // apart, since the epilogue's one rounding is not the unfused pair's bits.
  const Model::LinearGeluPairs gelu_pairs = m->linear_gelu_pairs();
  const bool gpu_epilogue = !gelu_pairs.gelu_nodes.empty() && mo.precision != DType::f32;
  validate(o.optimizer);
  // Per rank: the unsharded state, or (--zero 1) the state of rank 0's shard,
  // which every rank's equals (padded blocks).
  const std::size_t per_param = state_values_per_parameter(o.optimizer);
  const std::size_t state_elements =
      o.zero == 1 ? ZeroLayout(plan, o.world, 0).shard_count() : m->param_count();
  const std::size_t state_bytes = per_param * state_elements * sizeof(float);
  const std::string optimizer_text =
      o.optimizer.kind == "adamw"
          ? std::string("adamw")
          : fmt::format("sgd, momentum {:g}", static_cast<double>(o.optimizer.momentum));
  if (o.json) {
    nlohmann::json layers = nlohmann::json::array();
    for (std::size_t i = 0; i < m->layer_count(); ++i) {
      const auto [b, e] = m->layer_param_range(i);
      layers.push_back({{"name", m->layer_name(i)},
                        {"inputs", m->node_inputs(i)},
                        {"output", m->layer_output_shape(i)},
                        {"dtype", dtype_name(m->layer_output_dtype(i))},
                        {"params", e - b}});
    }
    nlohmann::json buckets = nlohmann::json::array();
    for (const Bucket& b : plan.buckets())
      buckets.push_back({{"offset", b.offset},
                         {"count", b.count},
                         {"first_layer", b.first_layer},
                         {"last_layer", b.last_layer}});
    const nlohmann::json out = {
        {"model", m->spec().to_string()},
        {"input", parse_shape(input, "--input")},
        {"classes", classes},
        {"params", m->param_count()},
        {"buffers", m->buffer_count()},
        {"precision", precision_name(mo.precision)},
        {"fuse", o.fuse},
        {"activation_bytes_per_sample", act},
        {"workspace_bytes_per_sample", workspace},
        {"optimizer_state_bytes", state_bytes},
        {"linear_gelu_epilogue", {{"gelu_nodes", gelu_pairs.gelu_nodes}, {"on_gpu", gpu_epilogue}}},
        {"layers", layers},
        {"buckets", buckets}};
    std::fputs((out.dump() + "\n").c_str(), stdout);
    return 0;
  }
  std::string s =
      fmt::format("{:<4} {:<28} {:<34} {:<18} {:>11}\n", "#", "node", "reads", "output", "params");
  for (std::size_t i = 0; i < m->layer_count(); ++i) {
    const auto [b, e] = m->layer_param_range(i);
    const std::vector<std::string> in = m->node_inputs(i);
    s += fmt::format("{:<4} {:<28} {:<34} {:<18} {:>11}\n", i, m->layer_name(i),
                     fmt::format("{}", fmt::join(in, ", ")), shape_text(m->layer_output_shape(i)),
                     e - b);
  }
  s += fmt::format("parameters: {} ({:.1f} MiB f32)\n", m->param_count(),
                   static_cast<double>(m->param_count()) * 4.0 / (1 << 20));
  s += fmt::format("non-trainable state: {} (BatchNorm running statistics)\n", m->buffer_count());
  s += fmt::format("activations and their gradients: {:.2f} MiB per sample (--precision {})\n",
                   static_cast<double>(act) / (1 << 20), precision_name(mo.precision));
  s += fmt::format(
      "layer workspace (the largest layer's scratch, CPU plan): {:.2f} MiB per sample\n",
      static_cast<double>(workspace) / (1 << 20));
  s += fmt::format("optimizer state ({}): {} bytes ({:.1f} MiB) per rank{}\n", optimizer_text,
                   state_bytes, static_cast<double>(state_bytes) / (1 << 20),
                   o.zero == 1 ? fmt::format(" with --zero 1 over {} ranks", o.world)
                               : std::string(o.world > 1 ? " (every rank holds all of it)" : ""));
  if (!gelu_pairs.gelu_nodes.empty()) {
    const std::vector<std::string>& g = gelu_pairs.gelu_nodes;
    const std::string names = g.size() == 1 ? g[0] : g.front() + " ... " + g.back();
    s += gpu_epilogue ? fmt::format(
                            "linear + gelu_tanh: {} pair(s) ({}) run as one cuBLASLt GEMM with the "
                            "GELU epilogue on a GPU; this CPU plan keeps them apart\n",
                            g.size(), names)
                      : fmt::format(
                            "linear + gelu_tanh: {} pair(s) ({}), fused on a GPU under bf16/fp16 "
                            "only\n",
                            g.size(), names);
  }
  s += fmt::format("gradient buckets (--bucket-mb {}): {}\n", o.bucket_mb, plan.buckets().size());
  s += plan.describe();
  s += fmt::format("spec hash {:016x}\n", m->spec().hash());
  std::fputs(s.c_str(), stdout);
  return 0;
}

CLI::App* add_model(CLI::App& app, CommandContext&) {
  CLI::App* sub = app.add_subcommand("model", "Inspect model specs and presets");
  sub->require_subcommand(1);
  return sub;
}

CLI::App* add_model_show(CLI::App& parent, CommandContext& ctx) {
  auto o = std::make_shared<ShowOptions>();
  CLI::App* sub = parent.add_subcommand(
      "show", "Build a model on the CPU and print its nodes, shapes, parameters and buckets");
  sub->add_option("--model", o->model, std::string("Model: ") + std::string(model_spec_help()))
      ->required();
  CLI::Option* input =
      sub->add_option("--input", o->input,
                      "Per-sample input shape C,H,W or F (a language-model preset: its context)")
          ->capture_default_str();
  CLI::Option* classes =
      sub->add_option("--classes", o->classes,
                      "Number of classes (gpt-nano: its vocabulary, default 256; gpt2 fixes 50257)")
          ->check(CLI::PositiveNumber)
          ->capture_default_str();
  sub->add_option("--batch", o->batch, "Batch the activations are planned for")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  sub->add_option("--bucket-mb", o->bucket_mb, "Gradient bucket cap, as for train")
      ->check(CLI::Range(0.0, 4096.0))
      ->capture_default_str();
  sub->add_option("--optimizer", o->optimizer.kind,
                  "For the optimizer-state figure: sgd or adamw, as for train")
      ->check(CLI::IsMember({"sgd", "adamw"}))
      ->capture_default_str();
  sub->add_option("--momentum", o->optimizer.momentum, "SGD momentum, as for train (0: no state)")
      ->capture_default_str();
  sub->add_option("--world", o->world, "Ranks the optimizer state is sharded over (--zero 1)")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  sub->add_option("--zero", o->zero, "1: the optimizer-state bytes per rank under ZeRO-1")
      ->check(CLI::IsMember({0, 1}))
      ->capture_default_str();
  sub->add_option("--precision", o->precision,
                  "fp32, bf16 or fp16, as for train: the activation bytes and each node's "
                  "stored dtype of that plan")
      ->check(CLI::IsMember({"fp32", "bf16", "fp16"}))
      ->capture_default_str();
  add_fuse_option(sub, o->fuse);
  sub->add_flag("--json", o->json,
                "One JSON object: params, buffers, precision, activation_bytes_per_sample, "
                "workspace_bytes_per_sample, optimizer_state_bytes, layers (each with its output's "
                "dtype), buckets");
  sub->add_flag("--text", o->text,
                "Print the graph in the model language instead, one node per line (blocks and "
                "repeats expanded, a preset written out for --classes): a spec to copy and edit")
      ->excludes("--json");
  sub->parse_complete_callback([&ctx, o, input, classes] {
    o->input_given = input->count() > 0;
    o->classes_given = classes->count() > 0;
    ctx.topology.device = DeviceRequest::cpu;
    ctx.action = [o](const Topology& t) { return run_show(*o, t); };
  });
  return sub;
}

// `ringtrain model list`: every preset --model takes, with what it is, as
// torchvision's list_models() and timm's list_models() show them.
int run_list() {
  std::string s = "presets (--model NAME; 'ringtrain model show --model NAME' for the graph):\n";
  for (const auto& [name, what] : model_preset_list())
    s += fmt::format("  {:<14} {}\n", name, what);
  s += "a layer list or a file of one: --model 'conv2d(out=8, kernel=3); relu; ...' or --model "
       "@model.txt (docs/models.md)\n";
  std::fputs(s.c_str(), stdout);
  return 0;
}

CLI::App* add_model_list(CLI::App& parent, CommandContext& ctx) {
  CLI::App* sub = parent.add_subcommand("list", "List the model presets --model takes");
  sub->parse_complete_callback([&ctx] {
    ctx.topology.device = DeviceRequest::cpu;
    ctx.action = [](const Topology& t) { return t.rank() == 0 ? run_list() : 0; };
  });
  return sub;
}

}  // namespace
}  // namespace ringtrain::apps

RINGTRAIN_REGISTER_COMMAND("", "model", 45, ringtrain::apps::add_model)
RINGTRAIN_REGISTER_COMMAND("model", "list", 5, ringtrain::apps::add_model_list)
RINGTRAIN_REGISTER_COMMAND("model", "show", 10, ringtrain::apps::add_model_show)
