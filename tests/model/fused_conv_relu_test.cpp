// Fused conv + bias + ReLU (--fuse, the plan's rewrite) against the unfused
// plan, which stays the reference: on a VGG-like graph and the cnn preset in
// both layouts under fp32, bf16 and fp16 storage, the logits, the loss and
// every parameter gradient are the same bits, in training (one backward, then
// one accumulated) and in evaluation. Also: the two fused passes against the
// unfused ops on values that probe the rounding (-0, values that round to 0
// or overflow in 16 bits, NaN), which nodes fuse (and which must not), names
// and parameters unchanged, and a finite-difference check of the fused model.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "ringtrain/model/model.h"
#include "ringtrain/model/model_spec.h"
#include "ringtrain/ops/activation.h"
#include "ringtrain/ops/bias.h"
#include "ringtrain/ops/bias_relu.h"
#include "ringtrain/ops/compute_context.h"
#include "ringtrain/ops/precision.h"
#include "ringtrain/tensor/tensor.h"
#include "tests/model/branch_first_graph.h"
#include "tests/model/plan_bits.h"
#include "tests/model/test_data.h"

using namespace ringtrain;
using namespace ringtrain::test;

namespace {

// c1 reads the model's input; r2 is read by c3 and by the add (its gradient
// is summed in fp32, c3's share now from the fused node); c4 has no bias and
// c5 a second reader (neither fuses).
const char* kVggLike = R"(input(3, 8, 8)
c1 = conv2d(out=4, kernel=3, padding=1)
r1 = relu
c2 = conv2d(out=6, kernel=3, padding=1, stride=2)
r2 = relu
c3 = conv2d(out=6, kernel=3, padding=1)
r3 = relu
sum = add(r3, r2)
c4 = conv2d(out=6, kernel=1, bias=0)
r4 = relu
c5 = conv2d(out=8, kernel=3, padding=1)
r5 = relu
tap = conv2d(c5, out=8, kernel=1)
both = add(r5, tap)
pool = max_pool2d(kernel=2, stride=2)
flat = flatten
fc = linear(out=5)
)";

constexpr std::size_t kBatch = 4;

ModelOptions options(DType precision, LayoutChoice layout, bool fuse) {
  ModelOptions o;
  o.device = Device::cpu();
  o.seed = 7;
  o.max_batch = kBatch;
  o.precision = precision;
  o.layout = layout;
  o.fuse = fuse;
  return o;
}

bool starts_with(const std::string& s, const std::string& prefix) {
  return s.rfind(prefix, 0) == 0;
}

// The words of a storage-dtype tensor, as 32-bit patterns of their values
// (exact: every 16-bit value widens exactly).
std::vector<std::uint32_t> stored_bits(const ComputeContext& ctx, const Tensor& t) {
  Tensor wide = Tensor::empty({t.numel()}, DType::f32, Device::cpu());
  convert_storage(ctx, wide.buffer(), t.buffer());
  return bits_of(wide.data_as<float>(), t.numel());
}

Tensor stored(const ComputeContext& ctx, const std::vector<float>& v, DType t) {
  Tensor out = Tensor::empty({v.size()}, t, Device::cpu());
  convert_storage(ctx, out.buffer(), view_of(v.data(), v.size()));
  return out;
}

}  // namespace

TEST_CASE("fused bias + relu passes: the unfused ops' bits, -0, underflow, overflow, NaN",
          "[ops][fusion]") {
  const DType t = GENERATE(DType::f32, DType::bf16, DType::f16);
  const bool nhwc = GENERATE(false, true);
  const bool accumulate = GENERATE(false, true);
  INFO(dtype_name(t) << (nhwc ? " rows" : " planes") << (accumulate ? " accumulate" : ""));
  auto ctx = ComputeContext::create(Device::cpu(), Tf32Mode::off, t);
  // [outer, channels, inner]: NCHW [3, 5, 7] or NHWC rows [21, 5, 1].
  const std::size_t channels = 5, outer = nhwc ? 21 : 3, inner = nhwc ? 1 : 7;
  const std::size_t n = outer * channels * inner;
  std::vector<float> conv = test::hashed_vector(1, n, -2.0f, 2.0f);
  // Values whose sum with the bias probes each rounding point.
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float specials[] = {-0.0f, 0.0f,  -1e-30f, 1e-30f, -1e-8f, 1e-8f,  7e4f,
                            -7e4f, 3e38f, nan,     -5e-8f, 6e-8f,  -2e-45f};
  for (std::size_t i = 0; i < sizeof specials / sizeof specials[0]; ++i)
    conv[i * 3 % n] = specials[i];
  std::vector<float> bias = test::hashed_vector(2, channels, -0.5f, 0.5f);
  bias[0] = -0.0f;  // conv -0 + bias -0 is -0, which relu stores as +0
  bias[1] = 0.0f;
  SECTION("forward, from the convolution's fp32 output and in place on its stored one") {
    // Unfused: the fp32 output plus the bias, narrowed, then relu.
    Tensor sum = Tensor::empty({n}, DType::f32, Device::cpu());
    std::copy(conv.begin(), conv.end(), sum.data_as<float>());
    bias_add(*ctx, sum.data_as<float>(), bias.data(), outer, channels, inner);
    Tensor narrowed = Tensor::empty({n}, t, Device::cpu());
    convert_storage(*ctx, narrowed.buffer(), sum.buffer());
    Tensor want = Tensor::empty({n}, t, Device::cpu());
    relu_forward(*ctx, narrowed.buffer(), want.buffer());
    Tensor got = Tensor::empty({n}, t, Device::cpu());
    bias_relu_into(*ctx, got.buffer(), view_of(conv.data(), n), bias.data(), outer, channels,
                   inner);
    CHECK(differing(stored_bits(*ctx, got), stored_bits(*ctx, want)) == 0);
    // A stored y (cuDNN's 16-bit output): bias_add in place, then relu.
    Tensor y = stored(*ctx, conv, t);
    bias_add(*ctx, y.buffer(), bias.data(), outer, channels, inner);
    relu_forward(*ctx, y.buffer(), want.buffer());
    Tensor in_place = stored(*ctx, conv, t);
    bias_relu_into(*ctx, in_place.buffer(), in_place.buffer(), bias.data(), outer, channels, inner);
    CHECK(differing(stored_bits(*ctx, in_place), stored_bits(*ctx, want)) == 0);
  }
  SECTION("backward: relu's mask and the bias gradient in one pass") {
    std::vector<float> y_values = conv;
    for (float& v : y_values) v = std::isnan(v) ? 0.0f : std::max(v, 0.0f);
    y_values[1] = -0.0f;  // not what relu stores, but the mask must treat it as relu does
    const Tensor y = stored(*ctx, y_values, t);
    std::vector<float> dy_values = test::hashed_vector(3, n, -1.0f, 1.0f);
    dy_values[2] = -0.0f;
    const Tensor dy = stored(*ctx, dy_values, t);
    // Unfused: relu's stored dx, then bias_grad of it widened (the conv's fp32 form).
    Tensor masked = Tensor::empty({n}, t, Device::cpu());
    relu_backward(*ctx, y.buffer(), dy.buffer(), masked.buffer());
    Tensor masked_wide = Tensor::empty({n}, DType::f32, Device::cpu());
    convert_storage(*ctx, masked_wide.buffer(), masked.buffer());
    const std::vector<float> previous = test::hashed_vector(4, channels, -3.0f, 3.0f);
    std::vector<float> want_db = previous, got_db = previous, got_db_stored = previous;
    bias_grad(*ctx, masked_wide.data_as<float>(), want_db.data(), outer, channels, inner,
              accumulate);
    Tensor got_wide = Tensor::empty({n}, DType::f32, Device::cpu());
    relu_mask_bias_grad(*ctx, y.buffer(), dy.buffer(), got_wide.buffer(), got_db.data(), outer,
                        channels, inner, accumulate);
    Tensor got = Tensor::empty({n}, t, Device::cpu());
    relu_mask_bias_grad(*ctx, y.buffer(), dy.buffer(), got.buffer(), got_db_stored.data(), outer,
                        channels, inner, accumulate);
    CHECK(differing(bits_of(got_wide.data_as<float>(), n),
                    bits_of(masked_wide.data_as<float>(), n)) == 0);
    CHECK(differing(stored_bits(*ctx, got), stored_bits(*ctx, masked)) == 0);
    CHECK(differing(bits_of(got_db.data(), channels), bits_of(want_db.data(), channels)) == 0);
    CHECK(differing(bits_of(got_db_stored.data(), channels), bits_of(want_db.data(), channels)) ==
          0);
  }
}

TEST_CASE("fused conv + bias + relu: which nodes fuse, names and parameters unchanged",
          "[model][fusion]") {
  const ModelSpec spec = ModelSpec::parse(kVggLike);
  auto fused = Model::build(spec, {3, 8, 8}, 5, options(DType::f32, LayoutChoice::nchw, true));
  auto plain = Model::build(spec, {3, 8, 8}, 5, options(DType::f32, LayoutChoice::nchw, false));
  REQUIRE(fused->layer_count() == plain->layer_count());
  for (std::size_t i = 0; i < fused->layer_count(); ++i) {
    CHECK(fused->layer_name(i) == plain->layer_name(i));
    CHECK(fused->layer_kind(i) == plain->layer_kind(i));
    CHECK(fused->node_inputs(i) == plain->node_inputs(i));
    CHECK(fused->layer_param_range(i) == plain->layer_param_range(i));
  }
  REQUIRE(fused->param_info().size() == plain->param_info().size());
  for (std::size_t k = 0; k < fused->param_info().size(); ++k)
    CHECK(fused->param_info()[k].name == plain->param_info()[k].name);
  const auto kernels = [&](const std::string& node) {
    return fused->layer_kernels(node_named(*fused, node));
  };
  // The fused row names the convolution's own kernels after the chain.
  const std::string conv_path = plain->layer_kernels(node_named(*plain, "c1"));
  REQUIRE(!conv_path.empty());
  CHECK(kernels("r1") == "fused c1+r1: " + conv_path);
  CHECK(kernels("c1") == "folded into r1");
  CHECK(starts_with(kernels("r2"), "fused c2+r2: "));
  CHECK(kernels("c2") == "folded into r2");
  CHECK(starts_with(kernels("r3"), "fused c3+r3: "));
  CHECK(kernels("r4").empty());  // c4 has no bias
  CHECK(!starts_with(kernels("c4"), "folded"));
  CHECK(kernels("r5").empty());  // c5 has a second reader
  CHECK(!starts_with(kernels("c5"), "folded"));
  CHECK(plain->layer_kernels(node_named(*plain, "r1")).empty());
  CHECK(fused->activation_bytes_per_sample() < plain->activation_bytes_per_sample());

  // The cnn preset: both convolutions; its classifier's relu reads a linear layer.
  auto cnn = Model::build(ModelSpec::parse("cnn"), {1, 28, 28}, 10,
                          options(DType::f32, LayoutChoice::nchw, true));
  std::size_t fused_nodes = 0, folded_nodes = 0;
  for (std::size_t i = 0; i < cnn->layer_count(); ++i) {
    fused_nodes += starts_with(cnn->layer_kernels(i), "fused conv");
    folded_nodes += starts_with(cnn->layer_kernels(i), "folded into relu");
  }
  CHECK(fused_nodes == 2);
  CHECK(folded_nodes == 2);
  CHECK(starts_with(cnn->layer_kernels(node_named(*cnn, "relu1")), "fused conv1+relu1: "));
  CHECK(cnn->layer_kernels(node_named(*cnn, "relu3")).empty());
}

TEST_CASE("fused conv + bias + relu: vgg16's thirteen convolutions fuse", "[model][fusion]") {
  // Fusion is planned per node, so one small input shows the whole preset.
  auto m = Model::build(ModelSpec::parse("vgg16"), {3, 32, 32}, 10,
                        options(DType::f32, LayoutChoice::nchw, true));
  std::size_t fused_nodes = 0;
  for (std::size_t i = 0; i < m->layer_count(); ++i) {
    const std::string k = m->layer_kernels(i);
    if (starts_with(k, "fused ")) {
      ++fused_nodes;
      CHECK(m->layer_kind(i) == "relu");
      CHECK(starts_with(k, "fused features."));
    }
  }
  CHECK(fused_nodes == 13);
  CHECK(
      starts_with(m->layer_kernels(node_named(*m, "features.1")), "fused features.0+features.1: "));
  CHECK(m->layer_kernels(node_named(*m, "features.0")) == "folded into features.1");
  CHECK(m->layer_kernels(node_named(*m, "classifier.1")).empty());
}

TEST_CASE("fused conv + bias + relu: the unfused plan's bits, training and evaluation",
          "[model][fusion][precision]") {
  const int which = GENERATE(0, 1, 2, 3, 4);
  const bool cnn = which == 1;
  const auto precision = GENERATE(DType::f32, DType::bf16, DType::f16);
  const auto layout = GENERATE(LayoutChoice::nchw, LayoutChoice::nhwc);
  INFO((cnn          ? "cnn"
        : which == 2 ? "branch first"
        : which == 3 ? "two readers on the grid"
        : which == 4 ? "a residual on the grid"
                     : "vgg-like")
       << ", precision " << dtype_name(precision) << ", layout "
       << (layout == LayoutChoice::nhwc ? "nhwc" : "nchw"));
  const ModelSpec spec = ModelSpec::parse(cnn          ? "cnn"
                                          : which == 2 ? test::kBranchFirst
                                          : which == 3 ? test::kTwoOnGrid
                                          : which == 4 ? test::kResidualOnGrid
                                                       : kVggLike);
  const std::vector<std::size_t> input =
      cnn ? std::vector<std::size_t>{1, 28, 28} : std::vector<std::size_t>{3, 8, 8};
  const std::size_t classes = cnn ? 10 : 5, in = input[0] * input[1] * input[2];
  auto fused =
      Model::build(spec, input, static_cast<int>(classes), options(precision, layout, true));
  auto plain =
      Model::build(spec, input, static_cast<int>(classes), options(precision, layout, false));
  REQUIRE(differing(bits_of(fused->params()), bits_of(plain->params())) == 0);
  // r1's gradient in the graphs of two readers on the grid: paired in 16 bits where fused,
  // an fp32 sum where not (the CPU's plain convolutions take the adapter).
  if (which >= 3) {
    const std::string paired = "gradient: its two readers'";
    INFO(fused->layer_kernels(1));
    CHECK((fused->layer_kernels(1).find(paired) != std::string::npos) == (precision != DType::f32));
    CHECK(plain->layer_kernels(1).find(paired) == std::string::npos);
  }
  const std::vector<float> x1 = test::hashed_vector(31, kBatch * in, -2.0f, 2.0f);
  const std::vector<float> x2 = test::hashed_vector(32, kBatch * in, -2.0f, 2.0f);
  const std::vector<std::int32_t> labels{0, 4, 2, 1};
  const float scale = precision == DType::f16 ? 1024.0f : 1.0f;
  const auto compare = [&](const char* what) {
    INFO(what);
    std::vector<float> fused_logits(kBatch * classes), plain_logits(kBatch * classes);
    fused->copy_logits(0, fused_logits.data(), fused_logits.size());
    plain->copy_logits(0, plain_logits.data(), plain_logits.size());
    CHECK(differing(bits_of(fused_logits.data(), fused_logits.size()),
                    bits_of(plain_logits.data(), plain_logits.size())) == 0);
    CHECK(differing(bits_of(fused->grads()), bits_of(plain->grads())) == 0);
  };
  for (Model* m : {fused.get(), plain.get()}) {
    const Model::LossResult r = m->forward(x1.data(), labels.data(), kBatch, true);
    CHECK(std::isfinite(r.loss_sum));
    m->backward(scale, false);
  }
  compare("a training step");
  // The folded convolutions' gradients are not mostly zero (the comparison
  // would prove little). (cnn's fc1 reads many dead features at batch 4.)
  const std::vector<std::uint32_t> g = bits_of(fused->grads());
  std::size_t folded = 0, zeros = 0, total = 0;
  for (std::size_t i = 0; i < fused->layer_count(); ++i) {
    if (!starts_with(fused->layer_kernels(i), "folded into ")) continue;
    ++folded;
    const auto [begin, end] = fused->layer_param_range(i);
    zeros += static_cast<std::size_t>(std::count(g.begin() + static_cast<std::ptrdiff_t>(begin),
                                                 g.begin() + static_cast<std::ptrdiff_t>(end), 0u));
    total += end - begin;
  }
  CHECK(folded == (cnn ? 2u : which == 4 ? 4u : 3u));
  CHECK(zeros < total / 4);
  double loss[2];
  int k = 0;
  for (Model* m : {fused.get(), plain.get()}) {
    loss[k++] = m->forward(x2.data(), labels.data(), kBatch, true).loss_sum;
    m->backward(scale, true);
  }
  CHECK(loss[0] == loss[1]);
  compare("a second, accumulated step");
  k = 0;
  for (Model* m : {fused.get(), plain.get()})
    loss[k++] = m->forward(x2.data(), labels.data(), kBatch, false).loss_sum;
  CHECK(loss[0] == loss[1]);
  compare("evaluation");
  // A smaller batch than the plan's (the shared workspace serves any batch).
  k = 0;
  for (Model* m : {fused.get(), plain.get()}) {
    loss[k++] = m->forward(x1.data(), labels.data(), 1, true).loss_sum;
    m->backward(scale, false);
  }
  CHECK(loss[0] == loss[1]);
  CHECK(differing(bits_of(fused->grads()), bits_of(plain->grads())) == 0);
}

TEST_CASE("fused conv + bias + relu: gradients match finite differences in fp32",
          "[model][fusion][gradient]") {
  const char* graph = R"(input(2, 5, 5)
c1 = conv2d(out=3, kernel=3, padding=1)
r1 = relu
c2 = conv2d(out=3, kernel=3, padding=1, stride=2)
r2 = relu
flat = flatten
fc = linear(out=3)
)";
  const std::size_t batch = 3;
  auto m = Model::build(ModelSpec::parse(graph), {2, 5, 5}, 3,
                        options(DType::f32, LayoutChoice::nchw, true));
  REQUIRE(starts_with(m->layer_kernels(node_named(*m, "r1")), "fused c1+r1"));
  REQUIRE(starts_with(m->layer_kernels(node_named(*m, "r2")), "fused c2+r2"));
  const std::vector<float> x = test::hashed_vector(4, batch * 50, -1.5f, 1.5f);
  const std::vector<std::int32_t> labels{0, 2, 1};
  check_parameter_gradients(*m, test::hashed_vector(3, m->param_count(), -0.6f, 0.6f), x, labels);
}
