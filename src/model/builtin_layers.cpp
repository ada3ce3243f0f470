// The built-in layer types: one table row each, registered like a plugin's
// types (LayerRegistry::add), with their parse-time checks, canonical text and
// factory side by side. To add a layer: a LayerKind, the Layer class in its own
// file, and a row here.
#include "model/builtin_layers.h"

#include <fmt/format.h>

#include "model/batch_norm_layer.h"
#include "model/causal_self_attention_layer.h"
#include "model/conv2d_layer.h"
#include "model/layer_norm_layer.h"
#include "model/linear_layer.h"
#include "model/merge_layers.h"
#include "model/position_embedding_layer.h"
#include "model/spec_values.h"
#include "model/stateless_layers.h"
#include "model/tied_lm_head_layer.h"
#include "model/token_embedding_layer.h"
#include "ringtrain/core/check.h"

namespace ringtrain {

namespace {

using Args = std::vector<SpecArg>;
using Canonical = std::vector<std::string>;

const SpecArg& required(const Args& bound, std::size_t i, std::string_view key,
                        std::string_view layer, const std::string& at) {
  if (bound[i].value.empty()) spec_fail(fmt::format("'{}' at {} needs '{}'", layer, at, key));
  return bound[i];
}

// The checks every built-in factory shares: a message naming the node's index
// and spec, as the model build reports them.
void need_rank(const LayerBuild& b, bool ok, std::string_view what) {
  RT_CHECK(ok, "layer {} ({}) needs a {} input but gets {}", b.index, b.spec->to_string(), what,
           b.input.to_string());
}

// ---- linear
void parse_linear(const Args& a, const std::string& at, LayerSpec& l) {
  const SpecArg& out = required(a, 0, "out", "linear", at);
  l.out = parse_count(out.value, "linear 'out'", out.where, false);
}
Canonical canonical_linear(const LayerSpec& l) {
  return {fmt::format("out={}", l.out)};
}
std::unique_ptr<Layer> make_linear(const LayerArgs&, const LayerBuild& b) {
  RT_CHECK(b.input.rank() == 1 || b.input.rank() == 2,
           "layer {} ({}) needs a flat [features] or [rows, features] input but gets {}: put "
           "'flatten' before it",
           b.index, b.spec->to_string(), b.input.to_string());
  return std::make_unique<LinearLayer>(b.name, b.input, b.spec->out, *b.ctx);
}

// ---- conv2d
void parse_conv2d(const Args& a, const std::string& at, LayerSpec& l) {
  const SpecArg& out = required(a, 0, "out", "conv2d", at);
  const SpecArg& kernel = required(a, 1, "kernel", "conv2d", at);
  l.out = parse_count(out.value, "conv2d 'out'", out.where, false);
  std::tie(l.kernel, l.kernel_w) = parse_pair(kernel.value, "conv2d 'kernel'", kernel.where, false);
  if (!a[2].value.empty())
    std::tie(l.stride, l.stride_w) = parse_pair(a[2].value, "conv2d 'stride'", a[2].where, false);
  else
    l.stride = 1;
  if (!a[3].value.empty())
    std::tie(l.padding, l.padding_w) = parse_pair(a[3].value, "conv2d 'padding'", a[3].where, true);
  if (!a[4].value.empty()) l.bias = parse_flag(a[4].value, "conv2d 'bias'", a[4].where);
}
Canonical canonical_conv2d(const LayerSpec& l) {
  Canonical c{fmt::format("out={}", l.out),
              fmt::format("kernel={}", pair_text(l.kernel, l.kernel_w)),
              fmt::format("stride={}", pair_text(l.stride, l.stride_w)),
              fmt::format("padding={}", pair_text(l.padding, l.padding_w))};
  if (!l.bias) c.push_back("bias=0");
  return c;
}
std::unique_ptr<Layer> make_conv2d(const LayerArgs&, const LayerBuild& b) {
  const Shape& input = b.input;
  const LayerSpec& spec = *b.spec;
  need_rank(b, input.rank() == 3, "[channels, height, width]");
  Conv2dGeometry g{input[0],      input[1],       input[2],     spec.out,
                   spec.kernel,   spec.stride,    spec.padding, spec.kernel_w,
                   spec.stride_w, spec.padding_w, b.layout};
  RT_CHECK(g.kh() <= input[1] + 2 * g.ph() && g.kw() <= input[2] + 2 * g.pw(),
           "layer {} ({}): kernel {}x{} does not fit the input {} with padding {}x{}", b.index,
           spec.to_string(), g.kh(), g.kw(), input.to_string(), g.ph(), g.pw());
  return std::make_unique<Conv2dLayer>(b.name, g, *b.ctx, b.max_batch, spec.bias);
}

// ---- max_pool2d, avg_pool2d
void parse_pool(const Args& a, const std::string& at, LayerSpec& l) {
  const std::string kind_name(layer_kind_name(l.kind));
  const SpecArg& kernel = required(a, 0, "kernel", kind_name, at);
  l.kernel = parse_count(kernel.value, kind_name + " 'kernel'", kernel.where, false);
  l.stride = a[1].value.empty()
                 ? l.kernel
                 : parse_count(a[1].value, kind_name + " 'stride'", a[1].where, false);
  l.padding =
      a[2].value.empty() ? 0 : parse_count(a[2].value, kind_name + " 'padding'", a[2].where, true);
  if (2 * l.padding > l.kernel)
    spec_fail(fmt::format("{} padding {} at {} must be at most half the kernel {}", kind_name,
                          l.padding, a[2].where, l.kernel));
}
Canonical canonical_pool(const LayerSpec& l) {
  Canonical c{fmt::format("kernel={}", l.kernel), fmt::format("stride={}", l.stride)};
  if (l.padding > 0) c.push_back(fmt::format("padding={}", l.padding));
  return c;
}
std::unique_ptr<Layer> make_pool(const LayerArgs&, const LayerBuild& b) {
  const Shape& input = b.input;
  const LayerSpec& spec = *b.spec;
  need_rank(b, input.rank() == 3, "[channels, height, width]");
  RT_CHECK(spec.kernel <= input[1] + 2 * spec.padding && spec.kernel <= input[2] + 2 * spec.padding,
           "layer {} ({}): kernel {} does not fit the input {} with padding {}", b.index,
           spec.to_string(), spec.kernel, input.to_string(), spec.padding);
  Pool2dGeometry g{input[0],
                   input[1],
                   input[2],
                   spec.kernel,
                   spec.stride,
                   spec.padding,
                   spec.kind == LayerKind::max_pool2d ? PoolMode::max : PoolMode::average,
                   b.layout};
  return std::make_unique<Pool2dLayer>(b.name, g, *b.ctx, b.max_batch);
}

// ---- global_avg_pool
std::unique_ptr<Layer> make_global_avg_pool(const LayerArgs&, const LayerBuild& b) {
  need_rank(b, b.input.rank() == 3, "[channels, height, width]");
  return std::make_unique<GlobalAvgPoolLayer>(b.name, b.input, *b.ctx, b.layout);
}

// ---- batch_norm
void parse_batch_norm(const Args& a, const std::string& at, LayerSpec& l) {
  if (!a[0].value.empty())
    l.eps = parse_real(a[0].value, "batch_norm 'eps'", a[0].where, 1e-12, 1.0);
  if (!a[1].value.empty())
    l.momentum = parse_real(a[1].value, "batch_norm 'momentum'", a[1].where, 0.0, 1.0);
  if (!a[2].value.empty()) l.affine = parse_flag(a[2].value, "batch_norm 'affine'", a[2].where);
  if (!a[3].value.empty())
    l.zero_init = parse_flag(a[3].value, "batch_norm 'zero_init'", a[3].where);
  if (l.zero_init && !l.affine)
    spec_fail(fmt::format("batch_norm at {}: zero_init needs affine=1", at));
}
Canonical canonical_batch_norm(const LayerSpec& l) {
  Canonical c;
  if (l.eps != 1e-5) c.push_back(fmt::format("eps={}", l.eps));
  if (l.momentum != 0.1) c.push_back(fmt::format("momentum={}", l.momentum));
  if (!l.affine) c.push_back("affine=0");
  if (l.zero_init) c.push_back("zero_init=1");
  return c;
}
std::unique_ptr<Layer> make_batch_norm(const LayerArgs&, const LayerBuild& b) {
  need_rank(b, b.input.rank() == 1 || b.input.rank() == 3,
            "[features] or [channels, height, width]");
  return std::make_unique<BatchNormLayer>(b.name, b.input, *b.spec, *b.ctx, b.layout);
}

// ---- add, concat
void parse_add(const Args& a, const std::string&, LayerSpec& l) {
  if (!a[0].value.empty()) l.scale = parse_real(a[0].value, "add 'scale'", a[0].where, -1e30, 1e30);
}
Canonical canonical_add(const LayerSpec& l) {
  if (l.scale != 1.0) return {fmt::format("scale={}", l.scale)};
  return {};
}
std::unique_ptr<Layer> make_add(const LayerArgs&, const LayerBuild& b) {
  return std::make_unique<AddLayer>(b.name, b.inputs, static_cast<float>(b.spec->scale), *b.ctx);
}
std::unique_ptr<Layer> make_concat(const LayerArgs&, const LayerBuild& b) {
  return std::make_unique<ConcatLayer>(b.name, b.inputs, *b.ctx, b.layout);
}

// ---- relu, gelu, flatten, dropout
std::unique_ptr<Layer> make_relu(const LayerArgs&, const LayerBuild& b) {
  return std::make_unique<ElementwiseActivationLayer>(b.name, b.input, *b.ctx, kReluActivation);
}
std::unique_ptr<Layer> make_gelu(const LayerArgs&, const LayerBuild& b) {
  return std::make_unique<ElementwiseActivationLayer>(b.name, b.input, *b.ctx, kGeluActivation);
}
std::unique_ptr<Layer> make_flatten(const LayerArgs&, const LayerBuild& b) {
  return std::make_unique<FlattenLayer>(b.name, b.input, *b.ctx, b.layout);
}
void parse_dropout(const Args& a, const std::string& at, LayerSpec& l) {
  const SpecArg& p = required(a, 0, "p", "dropout", at);
  l.p = parse_probability(p.value, "dropout 'p'", p.where);
}
Canonical canonical_dropout(const LayerSpec& l) {
  return {fmt::format("p={}", l.p)};
}
std::unique_ptr<Layer> make_dropout(const LayerArgs&, const LayerBuild& b) {
  return std::make_unique<DropoutLayer>(b.name, b.input, static_cast<float>(b.spec->p), b.index,
                                        *b.ctx, *b.dropout, b.layout);
}

void no_args(const Args&, const std::string&, LayerSpec&) {}
Canonical no_canonical(const LayerSpec&) {
  return {};
}

constexpr std::size_t kMany = static_cast<std::size_t>(-1);

// ---- the GPT-2 class layers (model/token_embedding_layer.h and its siblings)
void parse_token_embedding(const Args& a, const std::string& at, LayerSpec& l) {
  const SpecArg& vocab = required(a, 0, "vocab", "token_embedding", at);
  const SpecArg& dim = required(a, 1, "dim", "token_embedding", at);
  l.vocab = parse_count(vocab.value, "token_embedding 'vocab'", vocab.where, false);
  l.out = parse_count(dim.value, "token_embedding 'dim'", dim.where, false);
}
Canonical canonical_token_embedding(const LayerSpec& l) {
  return {fmt::format("vocab={}", l.vocab), fmt::format("dim={}", l.out)};
}
std::unique_ptr<Layer> make_token_embedding(const LayerArgs&, const LayerBuild& b) {
  need_rank(b, b.input.rank() == 1, "[T] token ids");
  return std::make_unique<TokenEmbeddingLayer>(b.name, b.input, b.spec->vocab, b.spec->out, *b.ctx,
                                               b.max_batch);
}
void parse_position_embedding(const Args& a, const std::string& at, LayerSpec& l) {
  const SpecArg& context = required(a, 0, "context", "position_embedding", at);
  l.context = parse_count(context.value, "position_embedding 'context'", context.where, false);
}
Canonical canonical_position_embedding(const LayerSpec& l) {
  return {fmt::format("context={}", l.context)};
}
std::unique_ptr<Layer> make_position_embedding(const LayerArgs&, const LayerBuild& b) {
  RT_CHECK(b.input.rank() == 2 && b.input[0] <= b.spec->context,
           "layer {} ({}) needs [T, C] rows with T <= {} but gets {}", b.index, b.spec->to_string(),
           b.spec->context, b.input.to_string());
  return std::make_unique<PositionEmbeddingLayer>(b.name, b.input, b.spec->context, *b.ctx);
}
void parse_layer_norm(const Args& a, const std::string&, LayerSpec& l) {
  if (!a[0].value.empty())
    l.eps = parse_real(a[0].value, "layer_norm 'eps'", a[0].where, 1e-12, 1.0);
}
Canonical canonical_layer_norm(const LayerSpec& l) {
  if (l.eps != 1e-5) return {fmt::format("eps={}", l.eps)};
  return {};
}
std::unique_ptr<Layer> make_layer_norm(const LayerArgs&, const LayerBuild& b) {
  return std::make_unique<LayerNormLayer>(b.name, b.input, static_cast<float>(b.spec->eps), *b.ctx,
                                          b.max_batch);
}
void parse_attention(const Args& a, const std::string& at, LayerSpec& l) {
  const SpecArg& heads = required(a, 0, "heads", "causal_self_attention", at);
  l.heads = parse_count(heads.value, "causal_self_attention 'heads'", heads.where, false);
  if (!a[1].value.empty())
    l.p = parse_probability(a[1].value, "causal_self_attention 'dropout'", a[1].where);
}
Canonical canonical_attention(const LayerSpec& l) {
  if (l.p > 0) return {fmt::format("heads={}", l.heads), fmt::format("dropout={}", l.p)};
  return {fmt::format("heads={}", l.heads)};
}
std::unique_ptr<Layer> make_attention(const LayerArgs&, const LayerBuild& b) {
  need_rank(b, b.input.rank() == 2, "[T, C] rows");
  return std::make_unique<CausalSelfAttentionLayer>(b.name, b.input, b.spec->heads, *b.ctx,
                                                    b.max_batch, static_cast<float>(b.spec->p),
                                                    b.index, b.dropout);
}
std::unique_ptr<Layer> make_gelu_tanh(const LayerArgs&, const LayerBuild& b) {
  return std::make_unique<ElementwiseActivationLayer>(b.name, b.input, *b.ctx, kGeluTanhActivation);
}
void parse_lm_head(const Args& a, const std::string& at, LayerSpec& l) {
  const SpecArg& tied = required(a, 0, "tied", "lm_head", at);
  if (!is_identifier(tied.value))
    spec_fail(fmt::format("lm_head 'tied' at {} must name the token_embedding node, got '{}'",
                          tied.where, tied.value));
  l.tied = tied.value;
}
Canonical canonical_lm_head(const LayerSpec& l) {
  return {fmt::format("tied={}", l.tied)};
}
std::unique_ptr<Layer> make_lm_head(const LayerArgs&, const LayerBuild& b) {
  need_rank(b, b.input.rank() == 2, "[T, C] rows");
  // The vocabulary is the tied embedding's: Model::build checks the pair.
  return std::make_unique<TiedLmHeadLayer>(b.name, b.input, b.spec->tied, b.spec->vocab, *b.ctx);
}

struct Row {
  LayerKind kind;
  const char* name;
  std::vector<std::string> args;
  std::vector<std::string> aliases;
  std::size_t min_inputs, max_inputs;
  void (*parse)(const Args&, const std::string&, LayerSpec&);
  Canonical (*canonical)(const LayerSpec&);
  std::unique_ptr<Layer> (*make)(const LayerArgs&, const LayerBuild&);
  bool gpu = true;  // false: the layer refuses a GPU model (not yet implemented there)
};

}  // namespace

void register_builtin_layers(LayerRegistry& registry) {
  // The order is the one of the messages' "known: ..." list.
  const Row rows[] = {
      {LayerKind::linear,
       "linear",
       {"out"},
       {"fc"},
       1,
       1,
       parse_linear,
       canonical_linear,
       make_linear},
      {LayerKind::conv2d,
       "conv2d",
       {"out", "kernel", "stride", "padding", "bias"},
       {"conv"},
       1,
       1,
       parse_conv2d,
       canonical_conv2d,
       make_conv2d},
      {LayerKind::max_pool2d,
       "max_pool2d",
       {"kernel", "stride", "padding"},
       {"maxpool", "maxpool2d"},
       1,
       1,
       parse_pool,
       canonical_pool,
       make_pool},
      {LayerKind::relu, "relu", {}, {}, 1, 1, no_args, no_canonical, make_relu},
      {LayerKind::gelu, "gelu", {}, {}, 1, 1, no_args, no_canonical, make_gelu},
      {LayerKind::flatten, "flatten", {}, {}, 1, 1, no_args, no_canonical, make_flatten},
      {LayerKind::dropout,
       "dropout",
       {"p"},
       {},
       1,
       1,
       parse_dropout,
       canonical_dropout,
       make_dropout},
      {LayerKind::avg_pool2d,
       "avg_pool2d",
       {"kernel", "stride", "padding"},
       {"avgpool", "avgpool2d"},
       1,
       1,
       parse_pool,
       canonical_pool,
       make_pool},
      {LayerKind::global_avg_pool,
       "global_avg_pool",
       {},
       {},
       1,
       1,
       no_args,
       no_canonical,
       make_global_avg_pool},
      {LayerKind::batch_norm,
       "batch_norm",
       {"eps", "momentum", "affine", "zero_init"},
       {"batchnorm", "bn"},
       1,
       1,
       parse_batch_norm,
       canonical_batch_norm,
       make_batch_norm},
      {LayerKind::add, "add", {"scale"}, {}, 2, kMany, parse_add, canonical_add, make_add},
      {LayerKind::concat, "concat", {}, {}, 2, kMany, no_args, no_canonical, make_concat},
      {LayerKind::token_embedding,
       "token_embedding",
       {"vocab", "dim"},
       {},
       1,
       1,
       parse_token_embedding,
       canonical_token_embedding,
       make_token_embedding},
      {LayerKind::position_embedding,
       "position_embedding",
       {"context"},
       {},
       1,
       1,
       parse_position_embedding,
       canonical_position_embedding,
       make_position_embedding},
      {LayerKind::layer_norm,
       "layer_norm",
       {"eps"},
       {},
       1,
       1,
       parse_layer_norm,
       canonical_layer_norm,
       make_layer_norm},
      {LayerKind::causal_self_attention,
       "causal_self_attention",
       {"heads", "dropout"},
       {},
       1,
       1,
       parse_attention,
       canonical_attention,
       make_attention},
      {LayerKind::gelu_tanh, "gelu_tanh", {}, {}, 1, 1, no_args, no_canonical, make_gelu_tanh},
      {LayerKind::lm_head,
       "lm_head",
       {"tied"},
       {},
       1,
       1,
       parse_lm_head,
       canonical_lm_head,
       make_lm_head},
  };
  for (const Row& r : rows) {
    LayerType t;
    t.name = r.name;
    t.arg_names = r.args;
    t.make = r.make;
    t.gpu = r.gpu;
    // Every built-in type takes channels-last [C, H, W] activations (conv2d,
    // pools, BatchNorm, merges, elementwise ones, flatten) or refuses any
    // [C, H, W] input with its own message, except layer_norm, which
    // normalises the last dimension: W in NCHW, but C in NHWC.
    t.channels_last = r.kind != LayerKind::layer_norm;
    t.aliases = r.aliases;
    t.min_inputs = r.min_inputs;
    t.max_inputs = r.max_inputs;
    t.parse = r.parse;
    t.canonical = r.canonical;
    t.kind = r.kind;
    registry.add(std::move(t));
  }
}

}  // namespace ringtrain
