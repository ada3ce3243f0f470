// The graph presets, written with GraphBuilder. Layouts follow torchvision
// (resnet.py, vgg.py) so that parameter counts and names match it.
#include "ringtrain/model/presets.h"

#include <fmt/format.h>

#include <optional>

#include "model/spec_values.h"
#include "ringtrain/core/check.h"
#include "ringtrain/model/graph_builder.h"

namespace ringtrain {

namespace {

struct ResNetLayout {
  bool bottleneck;
  std::vector<std::size_t> blocks;  // per stage
};

// torchvision's BasicBlock / Bottleneck (v1.5: the stride sits in the 3x3
// convolution); a projection (1x1 conv + BN) where the shape changes.
std::string resnet_block(GraphBuilder& g, const std::string& in, const std::string& prefix,
                         std::size_t in_channels, std::size_t planes, std::size_t stride,
                         bool bottleneck) {
  const std::size_t out_channels = bottleneck ? planes * 4 : planes;
  std::string x;
  if (bottleneck) {
    g.conv2d(planes, 1, 1, 0, false, prefix + ".conv1", {in});
    g.batch_norm(prefix + ".bn1");
    g.relu(prefix + ".relu1");
    g.conv2d(planes, 3, stride, 1, false, prefix + ".conv2");
    g.batch_norm(prefix + ".bn2");
    g.relu(prefix + ".relu2");
    g.conv2d(out_channels, 1, 1, 0, false, prefix + ".conv3");
    x = g.batch_norm(prefix + ".bn3");
  } else {
    g.conv2d(planes, 3, stride, 1, false, prefix + ".conv1", {in});
    g.batch_norm(prefix + ".bn1");
    g.relu(prefix + ".relu1");
    g.conv2d(planes, 3, 1, 1, false, prefix + ".conv2");
    x = g.batch_norm(prefix + ".bn2");
  }
  std::string shortcut = in;
  if (stride != 1 || in_channels != out_channels) {
    g.conv2d(out_channels, 1, stride, 0, false, prefix + ".downsample.0", {in});
    shortcut = g.batch_norm(prefix + ".downsample.1");
  }
  g.add({x, shortcut}, prefix + ".add");
  return g.relu(prefix + ".relu");
}

ModelSpec imagenet_resnet(const ResNetLayout& layout, std::size_t classes) {
  GraphBuilder g;
  g.conv2d(64, 7, 2, 3, false, "conv1");
  g.batch_norm("bn1");
  g.relu("relu");
  std::string x = g.max_pool2d(3, 2, 1, "maxpool");
  std::size_t channels = 64;
  const std::size_t widths[] = {64, 128, 256, 512};
  for (std::size_t stage = 0; stage < layout.blocks.size(); ++stage) {
    for (std::size_t b = 0; b < layout.blocks[stage]; ++b) {
      const std::size_t stride = (stage > 0 && b == 0) ? 2 : 1;
      x = resnet_block(g, x, fmt::format("layer{}.{}", stage + 1, b), channels, widths[stage],
                       stride, layout.bottleneck);
      channels = layout.bottleneck ? widths[stage] * 4 : widths[stage];
    }
  }
  g.global_avg_pool("avgpool");
  g.linear(classes, "fc");
  return g.spec();
}

// He et al.'s CIFAR ResNet (6n + 2 layers: 16/32/64 channels), with projection
// shortcuts (option B: 1x1 conv + BN) where the shape changes.
ModelSpec cifar_resnet(std::size_t depth, std::size_t classes) {
  const std::size_t n = (depth - 2) / 6;
  GraphBuilder g;
  g.conv2d(16, 3, 1, 1, false, "conv1");
  g.batch_norm("bn1");
  std::string x = g.relu("relu");
  std::size_t channels = 16;
  const std::size_t widths[] = {16, 32, 64};
  for (std::size_t stage = 0; stage < 3; ++stage)
    for (std::size_t b = 0; b < n; ++b) {
      const std::size_t stride = (stage > 0 && b == 0) ? 2 : 1;
      x = resnet_block(g, x, fmt::format("layer{}.{}", stage + 1, b), channels, widths[stage],
                       stride, false);
      channels = widths[stage];
    }
  g.global_avg_pool("avgpool");
  g.linear(classes, "fc");
  return g.spec();
}

// torchvision's VGG-16 ("D"); the classifier reads 512 x (H/32) x (W/32)
// features (25088 at 224 x 224, where torchvision's adaptive pool to 7 x 7 is
// the identity).
ModelSpec vgg16(bool batch_norm, std::size_t classes) {
  GraphBuilder g;
  const int cfg[] = {64, 64,  -1,  128, 128, -1,  256, 256, 256,
                     -1, 512, 512, 512, -1,  512, 512, 512, -1};
  std::size_t index = 0;
  for (int c : cfg) {
    if (c < 0) {
      g.max_pool2d(2, 2, 0, fmt::format("features.{}", index++));
      continue;
    }
    g.conv2d(static_cast<std::size_t>(c), 3, 1, 1, true, fmt::format("features.{}", index++));
    if (batch_norm) g.batch_norm(fmt::format("features.{}", index++));
    g.relu(fmt::format("features.{}", index++));
  }
  g.flatten("flatten");
  g.linear(4096, "classifier.0");
  g.relu("classifier.1");
  g.dropout(0.5, "classifier.2");
  g.linear(4096, "classifier.3");
  g.relu("classifier.4");
  g.dropout(0.5, "classifier.5");
  g.linear(classes, "classifier.6");
  return g.spec();
}

// torchvision's Inception v3 (aux_logits=False): every convolution a
// BasicConv2d (conv without bias, BatchNorm with eps 0.001, ReLU) named
// `<name>.conv` / `<name>.bn`; branches joined by concat.
class Inception3 {
 public:
  explicit Inception3(GraphBuilder& g) : g_(g) {}

  // kernel/padding per axis (height, width); stride square.
  std::string basic(const std::string& name, std::size_t out, std::size_t kh, std::size_t kw,
                    std::size_t stride, std::size_t ph, std::size_t pw, const std::string& in) {
    LayerSpec conv;
    conv.kind = LayerKind::conv2d;
    conv.out = out;
    conv.kernel = kh;
    conv.kernel_w = kw == kh ? LayerSpec::kSquare : kw;
    conv.stride = stride;
    conv.padding = ph;
    conv.padding_w = pw == ph ? LayerSpec::kSquare : pw;
    conv.bias = false;
    g_.node(conv, {in}, name + ".conv");
    LayerSpec bn;
    bn.kind = LayerKind::batch_norm;
    bn.eps = 0.001;
    g_.node(bn, {}, name + ".bn");
    return g_.relu(name + ".relu");
  }
  std::string basic(const std::string& name, std::size_t out, std::size_t k, std::size_t stride,
                    std::size_t padding, const std::string& in) {
    return basic(name, out, k, k, stride, padding, padding, in);
  }
  std::string branch_pool(const std::string& name, std::size_t out, const std::string& in) {
    g_.avg_pool2d(3, 1, 1, name + "_avg", {in});
    return basic(name, out, 1, 1, 0, g_.last());
  }

  // The 3x3 stride-2 max pool of the grid-reducing blocks (B and D).
  std::string reduction_pool(const std::string& name, const std::string& in) {
    LayerSpec pool;
    pool.kind = LayerKind::max_pool2d;
    pool.kernel = 3;
    pool.stride = 2;
    return g_.node(pool, {in}, name);
  }

  std::string a(const std::string& n, const std::string& x, std::size_t pool_features) {
    const std::string b1 = basic(n + ".branch1x1", 64, 1, 1, 0, x);
    basic(n + ".branch5x5_1", 48, 1, 1, 0, x);
    const std::string b5 = basic(n + ".branch5x5_2", 64, 5, 1, 2, g_.last());
    basic(n + ".branch3x3dbl_1", 64, 1, 1, 0, x);
    basic(n + ".branch3x3dbl_2", 96, 3, 1, 1, g_.last());
    const std::string b3 = basic(n + ".branch3x3dbl_3", 96, 3, 1, 1, g_.last());
    const std::string bp = branch_pool(n + ".branch_pool", pool_features, x);
    return g_.concat({b1, b5, b3, bp}, n);
  }
  std::string b(const std::string& n, const std::string& x) {
    const std::string b3 = basic(n + ".branch3x3", 384, 3, 2, 0, x);
    basic(n + ".branch3x3dbl_1", 64, 1, 1, 0, x);
    basic(n + ".branch3x3dbl_2", 96, 3, 1, 1, g_.last());
    const std::string bd = basic(n + ".branch3x3dbl_3", 96, 3, 2, 0, g_.last());
    const std::string bp = reduction_pool(n + ".branch_pool", x);
    return g_.concat({b3, bd, bp}, n);
  }
  std::string c(const std::string& n, const std::string& x, std::size_t c7) {
    const std::string b1 = basic(n + ".branch1x1", 192, 1, 1, 0, x);
    basic(n + ".branch7x7_1", c7, 1, 1, 0, x);
    basic(n + ".branch7x7_2", c7, 1, 7, 1, 0, 3, g_.last());
    const std::string b7 = basic(n + ".branch7x7_3", 192, 7, 1, 1, 3, 0, g_.last());
    basic(n + ".branch7x7dbl_1", c7, 1, 1, 0, x);
    basic(n + ".branch7x7dbl_2", c7, 7, 1, 1, 3, 0, g_.last());
    basic(n + ".branch7x7dbl_3", c7, 1, 7, 1, 0, 3, g_.last());
    basic(n + ".branch7x7dbl_4", c7, 7, 1, 1, 3, 0, g_.last());
    const std::string bd = basic(n + ".branch7x7dbl_5", 192, 1, 7, 1, 0, 3, g_.last());
    const std::string bp = branch_pool(n + ".branch_pool", 192, x);
    return g_.concat({b1, b7, bd, bp}, n);
  }
  std::string d(const std::string& n, const std::string& x) {
    basic(n + ".branch3x3_1", 192, 1, 1, 0, x);
    const std::string b3 = basic(n + ".branch3x3_2", 320, 3, 2, 0, g_.last());
    basic(n + ".branch7x7x3_1", 192, 1, 1, 0, x);
    basic(n + ".branch7x7x3_2", 192, 1, 7, 1, 0, 3, g_.last());
    basic(n + ".branch7x7x3_3", 192, 7, 1, 1, 3, 0, g_.last());
    const std::string b7 = basic(n + ".branch7x7x3_4", 192, 3, 2, 0, g_.last());
    const std::string bp = reduction_pool(n + ".branch_pool", x);
    return g_.concat({b3, b7, bp}, n);
  }
  std::string e(const std::string& n, const std::string& x) {
    const std::string b1 = basic(n + ".branch1x1", 320, 1, 1, 0, x);
    const std::string s3 = basic(n + ".branch3x3_1", 384, 1, 1, 0, x);
    const std::string s3a = basic(n + ".branch3x3_2a", 384, 1, 3, 1, 0, 1, s3);
    const std::string s3b = basic(n + ".branch3x3_2b", 384, 3, 1, 1, 1, 0, s3);
    const std::string b3 = g_.concat({s3a, s3b}, n + ".branch3x3");
    basic(n + ".branch3x3dbl_1", 448, 1, 1, 0, x);
    const std::string sd = basic(n + ".branch3x3dbl_2", 384, 3, 1, 1, g_.last());
    const std::string sda = basic(n + ".branch3x3dbl_3a", 384, 1, 3, 1, 0, 1, sd);
    const std::string sdb = basic(n + ".branch3x3dbl_3b", 384, 3, 1, 1, 1, 0, sd);
    const std::string bd = g_.concat({sda, sdb}, n + ".branch3x3dbl");
    const std::string bp = branch_pool(n + ".branch_pool", 192, x);
    return g_.concat({b1, b3, bd, bp}, n);
  }

 private:
  GraphBuilder& g_;
};

ModelSpec inception3(std::size_t classes) {
  GraphBuilder g;
  Inception3 net(g);
  net.basic("Conv2d_1a_3x3", 32, 3, 2, 0, "input");
  net.basic("Conv2d_2a_3x3", 32, 3, 1, 0, g.last());
  net.basic("Conv2d_2b_3x3", 64, 3, 1, 1, g.last());
  g.max_pool2d(3, 2, 0, "maxpool1");
  net.basic("Conv2d_3b_1x1", 80, 1, 1, 0, g.last());
  net.basic("Conv2d_4a_3x3", 192, 3, 1, 0, g.last());
  std::string x = g.max_pool2d(3, 2, 0, "maxpool2");
  x = net.a("Mixed_5b", x, 32);
  x = net.a("Mixed_5c", x, 64);
  x = net.a("Mixed_5d", x, 64);
  x = net.b("Mixed_6a", x);
  x = net.c("Mixed_6b", x, 128);
  x = net.c("Mixed_6c", x, 160);
  x = net.c("Mixed_6d", x, 160);
  x = net.c("Mixed_6e", x, 192);
  x = net.d("Mixed_7a", x);
  x = net.e("Mixed_7b", x);
  x = net.e("Mixed_7c", x);
  g.global_avg_pool("avgpool");
  g.dropout(0.5, "dropout");
  g.linear(classes, "fc");
  return g.spec();
}

// GPT-2 (Radford et al. 2019) as Hugging Face's GPT2LMHeadModel: pre-norm
// blocks, tanh GELU, the head tied to the token embedding. Node names are
// its module names without the leading "transformer.", so parameter names
// are h.0.attn.c_attn.weight, h.0.mlp.c_fc.bias, ln_f.weight, wte.weight.
struct GptLayout {
  std::size_t layers, width, heads, context, vocab;  // vocab 0: from the data
  double dropout;  // GPT-2's, on the embeddings, attention weights and residual branches
};

// "gpt2" or "gpt2:dropout=P": the layout, its dropout replaced when given.
// nullopt when the name is not a gpt preset; an Error when the suffix is bad.
std::optional<GptLayout> gpt_layout(std::string_view name) {
  // gpt-nano trains the CPU tests' small corpora, where the 1 x 4B = 2 x 2B
  // = 4 x B equivalence must hold (dropout masks depend on the rank): off.
  static const GptLayout nano{4, 128, 4, 128, 0, 0.0};
  static const GptLayout gpt2{12, 768, 12, 1024, 50257, 0.1};
  static const GptLayout medium{24, 1024, 16, 1024, 50257, 0.1};
  const std::string_view base = name.substr(0, name.find(':'));
  std::optional<GptLayout> l;
  if (base == "gpt-nano") l = nano;
  if (base == "gpt2") l = gpt2;
  if (base == "gpt2-medium") l = medium;
  if (!l || base.size() == name.size()) return l;
  const std::string_view suffix = name.substr(base.size() + 1);
  constexpr std::string_view kKey = "dropout=";
  RT_CHECK(suffix.rfind(kKey, 0) == 0,
           "preset '{}': after '{}:' only dropout=P is known (as in {}:dropout=0)", name, base,
           base);
  l->dropout = parse_probability(suffix.substr(kKey.size()), "preset dropout", std::string(name));
  return l;
}

ModelSpec gpt(const GptLayout& l, std::size_t vocab) {
  GraphBuilder g;
  const double p = l.dropout;
  LayerSpec wte{LayerKind::token_embedding};
  wte.vocab = vocab;
  wte.out = l.width;
  g.node(wte, {}, "wte");
  LayerSpec wpe{LayerKind::position_embedding};
  wpe.context = l.context;
  std::string x = g.node(wpe, {}, "wpe");
  // Dropout nodes only where it is on, so a model without dropout has the
  // very graph (and node numbering) it had before dropout existed.
  if (p > 0) x = g.dropout(p, "drop");
  LayerSpec attn{LayerKind::causal_self_attention};
  attn.heads = l.heads;
  attn.p = p;  // on the attention weights (GPT-2's attn_dropout)
  for (std::size_t i = 0; i < l.layers; ++i) {
    const std::string h = fmt::format("h.{}", i);
    g.node(LayerSpec{LayerKind::layer_norm}, {x}, h + ".ln_1");
    std::string a = g.node(attn, {}, h + ".attn");
    if (p > 0) a = g.dropout(p, h + ".attn.resid_dropout");
    x = g.add({x, a}, h + ".attn_residual");
    g.node(LayerSpec{LayerKind::layer_norm}, {x}, h + ".ln_2");
    g.linear(4 * l.width, h + ".mlp.c_fc");
    g.node(LayerSpec{LayerKind::gelu_tanh}, {}, h + ".mlp.gelu");
    std::string m = g.linear(l.width, h + ".mlp.c_proj");
    if (p > 0) m = g.dropout(p, h + ".mlp.dropout");
    x = g.add({x, m}, h + ".mlp_residual");
  }
  g.node(LayerSpec{LayerKind::layer_norm}, {x}, "ln_f");
  LayerSpec head{LayerKind::lm_head};
  head.tied = "wte";
  g.node(head, {}, "lm_head");
  ModelSpec spec = g.spec();
  spec.input_shape = {l.context};
  return spec;
}

}  // namespace

std::optional<LanguageModelShape> language_model_shape(std::string_view name) {
  const std::optional<GptLayout> l = gpt_layout(name);
  if (!l) return std::nullopt;
  return LanguageModelShape{l->context, l->vocab};
}

std::vector<std::pair<std::string, std::string>> graph_preset_list() {
  return {{"resnet18", "ImageNet ResNet-18 (11,689,512 parameters at 1000 classes)"},
          {"resnet34", "ImageNet ResNet-34 (21,797,672)"},
          {"resnet50", "ImageNet ResNet-50 v1.5 (25,557,032)"},
          {"resnet101", "ImageNet ResNet-101 v1.5 (44,549,160)"},
          {"resnet20", "CIFAR ResNet-20, 16/32/64 channels, projection shortcuts"},
          {"resnet32", "CIFAR ResNet-32"},
          {"resnet56", "CIFAR ResNet-56"},
          {"vgg16", "VGG-16 (138,357,544 at 224x224 and 1000 classes)"},
          {"vgg16_bn", "VGG-16 with BatchNorm (138,365,992)"},
          {"inception3",
           "Inception v3 as torchvision's, without the auxiliary classifier "
           "(23,834,568; 299x299 input, 75x75 at the least)"},
          {"gpt-nano",
           "GPT-2 style language model for CPU runs: 4 layers, 128 wide, 4 heads, context 128, "
           "vocabulary from the data, no dropout (gpt-nano:dropout=P sets one)"},
          {"gpt2",
           "GPT-2 124M: 12 layers, 768 wide, 12 heads, context 1024, vocabulary 50257 "
           "(124,439,808 parameters, head tied), dropout 0.1 (gpt2:dropout=0 turns it off)"},
          {"gpt2-medium",
           "GPT-2 medium: 24 layers, 1024 wide, 16 heads, context 1024, "
           "vocabulary 50257 (354,823,168), dropout 0.1"}};
}

std::vector<std::pair<std::string, std::string>> model_preset_list() {
  std::vector<std::pair<std::string, std::string>> all = {
      {"cnn", "2 conv + 2 pool + 2 FC for 1x28x28 (421,642 parameters)"},
      {"mlp:784-512-10", "fully connected: input, hidden sizes..., classes; ReLU between"}};
  for (auto& preset : graph_preset_list()) all.push_back(std::move(preset));
  return all;
}

bool is_graph_preset(std::string_view name) {
  for (const auto& [n, _] : graph_preset_list())
    if (n == name) return true;
  return gpt_layout(name).has_value();
}

ModelSpec graph_preset(std::string_view name, std::size_t classes) {
  RT_CHECK(classes > 0, "preset {}: the class count must be positive", name);
  ModelSpec spec;
  if (name == "resnet18")
    spec = imagenet_resnet({false, {2, 2, 2, 2}}, classes);
  else if (name == "resnet34")
    spec = imagenet_resnet({false, {3, 4, 6, 3}}, classes);
  else if (name == "resnet50")
    spec = imagenet_resnet({true, {3, 4, 6, 3}}, classes);
  else if (name == "resnet101")
    spec = imagenet_resnet({true, {3, 4, 23, 3}}, classes);
  else if (name == "resnet20")
    spec = cifar_resnet(20, classes);
  else if (name == "resnet32")
    spec = cifar_resnet(32, classes);
  else if (name == "resnet56")
    spec = cifar_resnet(56, classes);
  else if (name == "vgg16")
    spec = vgg16(false, classes);
  else if (name == "vgg16_bn")
    spec = vgg16(true, classes);
  else if (name == "inception3")
    spec = inception3(classes);
  else if (const std::optional<GptLayout> l = gpt_layout(name))
    spec = gpt(*l, l->vocab > 0 ? l->vocab : classes);
  else
    RT_CHECK(false, "unknown model preset '{}'", name);
  spec.preset = std::string(name);
  return spec;
}

}  // namespace ringtrain
