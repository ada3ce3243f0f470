// Models as graphs: the language (names, inputs, errors at line:column), the
// canonical text, fan-out and multi-input nodes checked end to end with finite
// differences, BatchNorm state in the model, and the presets' parameter counts
// against torchvision's.
#include <catch2/catch.hpp>

#include <cmath>

#include "ringtrain/core/error.h"
#include "ringtrain/model/graph_builder.h"
#include "ringtrain/model/model.h"
#include "ringtrain/model/presets.h"
#include "tests/model/test_data.h"

using namespace ringtrain;

namespace {

ModelOptions cpu_options(std::size_t max_batch = 8) {
  ModelOptions o;
  o.device = Device::cpu();
  o.seed = 5;
  o.max_batch = max_batch;
  return o;
}

// A residual branch, a node read three times (a), add with a scale, concat,
// pooling and BatchNorm: every new path of backward at once.
const char* kBlock = R"(input(2, 6, 6)
stem = conv2d(out=4, kernel=3, padding=1, bias=0)
bn = batch_norm
a = gelu
b1 = conv2d(a, out=4, kernel=3, padding=1)
b2 = gelu(b1)
sum = add(b2, a, scale=0.5)
c1 = conv2d(a, out=2, kernel=1)
cat = concat(sum, c1)
p = avg_pool2d(kernel=2)
g = global_avg_pool
fc = linear(out=3)
)";

double mean_loss(Model& m, const std::vector<float>& x, const std::vector<std::int32_t>& labels) {
  const std::size_t batch = labels.size();
  return m.forward(x.data(), labels.data(), batch, true).loss_sum / static_cast<double>(batch);
}

}  // namespace

TEST_CASE("graph language: names, inputs, canonical text", "[model][graph]") {
  const ModelSpec spec = ModelSpec::parse(kBlock);
  REQUIRE(spec.layers.size() == 11);
  CHECK(spec.layers[0].name == "stem");
  CHECK(spec.layers[0].inputs.empty());
  CHECK_FALSE(spec.layers[0].bias);
  CHECK(spec.layers[3].inputs == std::vector<std::string>{"a"});
  CHECK(spec.layers[5].kind == LayerKind::add);
  CHECK(spec.layers[5].inputs == std::vector<std::string>{"b2", "a"});
  CHECK(spec.layers[5].scale == 0.5);
  CHECK(spec.layers[7].kind == LayerKind::concat);
  const std::string text = spec.to_string();
  CHECK(text.find("sum = add(b2, a, scale=0.5)") != std::string::npos);
  CHECK(text.find("stem = conv2d(out=4, kernel=3, stride=1, padding=1, bias=0)") !=
        std::string::npos);
  CHECK(ModelSpec::parse(text) == spec);
  CHECK(ModelSpec::parse(text).hash() == spec.hash());
  // A plain list keeps its old canonical text, so old specs and checkpoints hold.
  CHECK(ModelSpec::parse("conv2d(out=8, kernel=3); relu; flatten; linear(out=10)").to_string() ==
        "conv2d(out=8, kernel=3, stride=1, padding=0); relu; flatten; linear(out=10)");
  // Rectangular kernels print as HxW and read back.
  const ModelSpec rect =
      ModelSpec::parse("conv2d(out=4, kernel=1x7, padding=0x3); flatten; linear(out=2)");
  CHECK(rect.layers[0].kernel == 1);
  CHECK(rect.layers[0].kernel_w == 7);
  CHECK(rect.to_string().find("kernel=1x7, stride=1, padding=0x3") != std::string::npos);
  CHECK(ModelSpec::parse(rect.to_string()) == rect);
  CHECK(ModelSpec::parse("conv2d(out=4, kernel=3x3)").layers[0].kernel_w == LayerSpec::kSquare);
  // 'input' is the model's input; names may hold dots (torchvision's module paths).
  const ModelSpec r = ModelSpec::parse(
      "layer1.0.conv = conv2d(input, out=2, kernel=1); "
      "y = add(layer1.0.conv, input); flatten; linear(out=2)");
  CHECK(r.layers[1].inputs == std::vector<std::string>{"layer1.0.conv", "input"});
}

TEST_CASE("graph language: errors name the node and line:column", "[model][graph]") {
  CHECK_THROWS_WITH(ModelSpec::parse("a = relu\nb = add(a, c)"),
                    Catch::Contains("unknown input 'c'") && Catch::Contains("2:12"));
  CHECK_THROWS_WITH(ModelSpec::parse("a = relu\na = gelu"),
                    Catch::Contains("node 'a' defined twice") && Catch::Contains("2:1"));
  CHECK_THROWS_WITH(ModelSpec::parse("a = relu; b = add(a)"),
                    Catch::Contains("needs at least two inputs"));
  CHECK_THROWS_WITH(ModelSpec::parse("a = relu; b = gelu(a, a)"),
                    Catch::Contains("takes one input"));
  CHECK_THROWS_WITH(ModelSpec::parse("input = gelu"), Catch::Contains("the model's input"));
  CHECK_THROWS_WITH(ModelSpec::parse("batch_norm(zero_init=1, affine=0)"),
                    Catch::Contains("zero_init needs affine=1"));
  // Shapes that do not agree, and nodes that lead nowhere, when the model is built.
  const auto build = [](const char* text, std::vector<std::size_t> in) {
    return Model::build(ModelSpec::parse(text), in, 3, cpu_options());
  };
  CHECK_THROWS_WITH(
      build("a = conv2d(out=4, kernel=1); b = conv2d(input, out=2, kernel=1); "
            "s = add(a, b); flatten; linear(out=3)",
            {2, 4, 4}),
      Catch::Contains("node 's'") && Catch::Contains("[2, 4, 4]") && Catch::Contains("[4, 4, 4]"));
  CHECK_THROWS_WITH(build("a = conv2d(out=4, kernel=1); b = conv2d(input, out=2, kernel=1); "
                          "flatten; linear(out=3)",
                          {2, 4, 4}),
                    Catch::Contains("node 'a'") && Catch::Contains("read by no later node"));
  CHECK_THROWS_WITH(build("a = max_pool2d(kernel=2); b = conv2d(input, out=2, kernel=1); "
                          "c = concat(a, b); flatten; linear(out=3)",
                          {2, 4, 4}),
                    Catch::Contains("concat") && Catch::Contains("input 1"));
}

TEST_CASE("graph model: gradients of fan-out, add, concat and BatchNorm match finite differences",
          "[model][graph][gradient]") {
  const std::size_t batch = 4;
  auto m = Model::build(ModelSpec::parse(kBlock), {2, 6, 6}, 3, cpu_options());
  REQUIRE(m->layer_count() == 11);
  CHECK(m->node_inputs(5) == std::vector<std::string>{"b2", "a"});
  CHECK(m->node_inputs(0) == std::vector<std::string>{"input"});
  CHECK(m->buffer_count() == 8);  // bn: running_mean[4], running_var[4]
  float* params = static_cast<float*>(m->params().ptr);
  const std::vector<float> init = test::hashed_vector(3, m->param_count(), -0.6f, 0.6f);
  std::copy(init.begin(), init.end(), params);
  const std::vector<float> x = test::hashed_vector(4, batch * 72, -1.5f, 1.5f);
  const std::vector<std::int32_t> labels{0, 2, 1, 2};
  mean_loss(*m, x, labels);
  m->backward(1.0f, false);
  const std::vector<float> grads(static_cast<float*>(m->grads().ptr),
                                 static_cast<float*>(m->grads().ptr) + m->param_count());
  const float eps = 1e-2f;
  std::size_t checked = 0;
  for (std::size_t i = 0; i < m->param_count(); ++i) {
    params[i] = init[i] + eps;
    const double lp = mean_loss(*m, x, labels);
    params[i] = init[i] - eps;
    const double lm = mean_loss(*m, x, labels);
    params[i] = init[i];
    const double numeric = (lp - lm) / (2.0 * eps);
    INFO("parameter " << i << ": analytic " << grads[i] << " vs numeric " << numeric);
    CHECK(std::abs(grads[i] - numeric) <= 2e-3 + 3e-2 * std::abs(numeric));
    ++checked;
  }
  CHECK(checked == m->param_count());
}

TEST_CASE("graph model: BatchNorm's running statistics are model state, not parameters",
          "[model][graph][batch_norm]") {
  auto m = Model::build(ModelSpec::parse(kBlock), {2, 6, 6}, 3, cpu_options());
  REQUIRE(m->buffer_info().size() == 2);
  CHECK(m->buffer_info()[0].name == "bn.running_mean");
  CHECK(m->buffer_info()[1].name == "bn.running_var");
  const float* b = static_cast<const float*>(m->buffers().ptr);
  CHECK(std::vector<float>(b, b + 8) == std::vector<float>{0, 0, 0, 0, 1, 1, 1, 1});
  const std::vector<float> x = test::hashed_vector(4, 4 * 72, -1.5f, 1.5f);
  const std::vector<std::int32_t> labels{0, 2, 1, 2};
  m->forward(x.data(), labels.data(), 4, false);  // evaluation: nothing moves
  CHECK(std::vector<float>(b, b + 8) == std::vector<float>{0, 0, 0, 0, 1, 1, 1, 1});
  m->forward(x.data(), labels.data(), 4, true);  // training: the running statistics move
  CHECK(std::vector<float>(b, b + 8) != std::vector<float>{0, 0, 0, 0, 1, 1, 1, 1});
  for (const ParamInfo& p : m->param_info()) CHECK(p.name.find("running") == std::string::npos);
}

TEST_CASE("presets: parameter and buffer counts equal torchvision's", "[model][preset]") {
  // torchvision 0.14 (Debian's python3-torchvision) at 1000 classes, 3x224x224:
  // sum(p.numel() for p in m.parameters()) and the BatchNorm running statistics.
  struct Expected {
    const char* name;
    std::size_t params, buffers;
  };
  const Expected expected[] = {{"resnet18", 11689512, 9600},  {"resnet34", 21797672, 17024},
                               {"resnet50", 25557032, 53120}, {"resnet101", 44549160, 105344},
                               {"vgg16", 138357544, 0},       {"vgg16_bn", 138365992, 8448}};
  // inception_v3(aux_logits=False) at 3x299x299
  {
    auto m = Model::build(ModelSpec::parse("inception3"), {3, 299, 299}, 1000, cpu_options(1));
    CHECK(m->param_count() == 23834568);
    CHECK(m->buffer_count() == 34432);
    CHECK(m->param_info().front().name == "Conv2d_1a_3x3.conv.weight");
    CHECK(m->param_info().back().name == "fc.bias");
  }
  for (const Expected& e : expected) {
    INFO(e.name);
    auto m = Model::build(ModelSpec::parse(e.name), {3, 224, 224}, 1000, cpu_options(1));
    CHECK(m->param_count() == e.params);
    CHECK(m->buffer_count() == e.buffers);
  }
  // torchvision's names, so that weights can travel both ways.
  auto r = Model::build(ModelSpec::parse("resnet18"), {3, 64, 64}, 10, cpu_options(1));
  std::vector<std::string> names;
  for (const ParamInfo& p : r->param_info()) names.push_back(p.name);
  CHECK(names.front() == "conv1.weight");
  CHECK(std::find(names.begin(), names.end(), "layer2.0.downsample.0.weight") != names.end());
  CHECK(std::find(names.begin(), names.end(), "layer4.1.bn2.bias") != names.end());
  CHECK(names.back() == "fc.bias");
  CHECK(r->buffer_info().front().name == "bn1.running_mean");
  // The class count comes from the data; the spec stays the preset's name.
  CHECK(r->spec().to_string() == "resnet18");
  CHECK(r->layer_output_shape(r->layer_count() - 1) == std::vector<std::size_t>{10});
}

TEST_CASE("presets: the CIFAR ResNets take small inputs of any channel count", "[model][preset]") {
  for (const char* name : {"resnet20", "resnet32", "resnet56"}) {
    INFO(name);
    auto m = Model::build(ModelSpec::parse(name), {1, 28, 28}, 10, cpu_options(2));
    CHECK(m->layer_output_shape(m->layer_count() - 1) == std::vector<std::size_t>{10});
  }
  // 6n + 2 layers: 3 stages of n basic blocks (2 convs each), the stem and fc.
  const ModelSpec s = graph_preset("resnet20", 10);
  std::size_t convs = 0;
  for (const LayerSpec& l : s.layers) convs += l.kind == LayerKind::conv2d ? 1 : 0;
  CHECK(convs == 19 + 2);  // 19 + the 2 projection shortcuts
}

TEST_CASE("graph builder: the same spec as the text", "[model][graph]") {
  GraphBuilder g;
  g.conv2d(4, 3, 1, 1, false, "stem");
  const std::string a = g.relu("a");
  g.conv2d(4, 3, 1, 1, true, "b");
  g.add({"b", a}, "y");
  g.global_avg_pool("g");
  g.linear(3, "fc");
  const ModelSpec text = ModelSpec::parse(
      "stem = conv2d(out=4, kernel=3, padding=1, bias=0); a = relu; b = conv2d(out=4, kernel=3, "
      "padding=1); y = add(b, a); g = global_avg_pool; fc = linear(out=3)");
  CHECK(g.spec() == text);
}

TEST_CASE("graph model: gradient buffers whose lives do not overlap share memory",
          "[model][graph][memory]") {
  // A chain needs two gradient buffers at any time (ping-pong), whatever its
  // length; a residual net a few more. The plan must stay far below one
  // gradient buffer per node, which is what the activations themselves take.
  for (const char* name : {"cnn", "resnet20"}) {
    INFO(name);
    auto m = Model::build(ModelSpec::parse(name), {1, 28, 28}, 10, cpu_options(4));
    std::size_t outputs = 0, largest = 0;
    for (std::size_t i = 0; i < m->layer_count(); ++i) {
      std::size_t n = 1;
      for (std::size_t d : m->layer_output_shape(i)) n *= d;
      outputs += n;
      largest = std::max(largest, n);
    }
    const std::size_t per_sample = m->activation_bytes_per_sample() / sizeof(float);
    // activations (at most every output) + scratch (two input slots at most) +
    // gradients: well under another copy of every output
    CHECK(per_sample < outputs + 2 * largest + outputs / 2);
  }
}
