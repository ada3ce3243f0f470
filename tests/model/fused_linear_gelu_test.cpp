// Fused linear + gelu_tanh (model/fused_linear_gelu.h), through its CPU twin
// (ModelOptions::fuse_linear_gelu = on; the CPU's default plan never fuses
// it). The twin rounds the pre-activation and gelu of the unrounded fp32 sum
// once each, as cuBLASLt's GELU_AUX_BIAS epilogue does, where the unfused
// pair takes gelu of the rounded pre-activation:
// - under fp32 it is the unfused plan bit for bit (gpt-nano: logits, loss,
//   every gradient; training, accumulation, evaluation);
// - under bf16/fp16 the pre-activation (the auxiliary) is the unfused pair's
//   bits, the output is within one rounding of the unfused pair's and within
//   half a grid step (plus fp32 error) of a float64 gelu(x Wᵀ + b), and no
//   farther from it than the unfused pair's in sum;
// - which nodes fuse (gpt-nano: every block's c_fc + gelu), and which must
//   not (a linear with another reader); names and parameters unchanged;
// - finite-difference gradients through the fused nodes.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/precision.cuh"
#include "kernels/storage.cuh"
#include "model/fused_linear_gelu.h"
#include "model/layer_workspace.h"
#include "model/linear_layer.h"
#include "model/stateless_layers.h"
#include "ringtrain/model/model.h"
#include "ringtrain/model/model_spec.h"
#include "ringtrain/ops/activation.h"
#include "ringtrain/ops/compute_context.h"
#include "ringtrain/ops/precision.h"
#include "ringtrain/tensor/tensor.h"
#include "tests/model/gelu_fusion_support.h"
#include "tests/model/plan_bits.h"
#include "tests/model/test_data.h"

using namespace ringtrain;
using namespace ringtrain::test;

namespace {

// Token ids and next-token labels, a function of (salt, index).
void tokens(std::uint64_t salt, std::vector<float>& ids, std::vector<std::int32_t>& labels) {
  test::hashed_tokens(salt, kBatch * kContext, kVocab, ids, labels);
}

std::size_t count_prefixed(const Model& m, const std::string& prefix) {
  std::size_t n = 0;
  for (std::size_t i = 0; i < m.layer_count(); ++i) n += m.layer_kernels(i).rfind(prefix, 0) == 0;
  return n;
}

// GPT-2's gelu in float64.
double gelu_tanh64(double x) {
  return 0.5 * x * (1.0 + std::tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
}

}  // namespace

TEST_CASE("fused linear + gelu: which nodes fuse on gpt-nano, and only when asked on the CPU",
          "[model][fusion]") {
  const DType precision = GENERATE(DType::f32, DType::bf16);
  INFO(dtype_name(precision));
  const ModelSpec spec = ModelSpec::parse("gpt-nano");
  auto forced = Model::build(spec, {kContext}, kVocab, options(precision, true, LinearGelu::on));
  auto automatic =
      Model::build(spec, {kContext}, kVocab, options(precision, true, LinearGelu::automatic));
  auto never = Model::build(spec, {kContext}, kVocab, options(precision, true, LinearGelu::off));
  auto unfused = Model::build(spec, {kContext}, kVocab, options(precision, false, LinearGelu::on));
  REQUIRE(forced->layer_count() == unfused->layer_count());
  for (std::size_t i = 0; i < forced->layer_count(); ++i) {
    CHECK(forced->layer_name(i) == unfused->layer_name(i));
    CHECK(forced->layer_kind(i) == unfused->layer_kind(i));
    CHECK(forced->node_inputs(i) == unfused->node_inputs(i));
    CHECK(forced->layer_param_range(i) == unfused->layer_param_range(i));
    CHECK(forced->layer_output_dtype(i) == unfused->layer_output_dtype(i));
  }
  const auto kernels = [&](const std::string& node) {
    return forced->layer_kernels(node_named(*forced, node));
  };
  for (int b = 0; b < 4; ++b) {
    const std::string h = "h." + std::to_string(b) + ".mlp.";
    CHECK(kernels(h + "c_fc") == "forward fused into " + h + "gelu");
    CHECK(kernels(h + "gelu")
              .rfind("fused " + h + "c_fc+" + h + "gelu: CPU twin of cuBLASLt's " +
                         "GELU_AUX_BIAS epilogue",
                     0) == 0);
    // Its reader runs gelu's backward (fused_linear_dgelu_test).
    CHECK(kernels(h + "c_proj").rfind("dx fused with " + h + "gelu's backward: ", 0) == 0);
  }
  // 4 blocks: 4 linear + gelu pairs beside the 8 residual + LayerNorm ones.
  CHECK(count_prefixed(*forced, "forward fused into ") == 4);
  CHECK(count_prefixed(*forced, "fused ") == 12);
  // The CPU's default plan (and off) keep the unfused pair: --fuse on's bits
  // stay --fuse off's there.
  for (const Model* m : {automatic.get(), never.get()}) {
    CHECK(count_prefixed(*m, "forward fused into ") == 0);
    CHECK(count_prefixed(*m, "fused ") == 8);
  }
  CHECK(count_prefixed(*unfused, "fused ") == 0);
  CHECK(count_prefixed(*unfused, "forward fused into ") == 0);
  // The linear keeps its output (the pre-activation gelu's backward reads):
  // no less memory than the unfused pair's; more, as the fused backward keeps
  // the pre-activation's gradient from the linear's backward down.
  CHECK(forced->activation_bytes_per_sample() >= automatic->activation_bytes_per_sample());
}

TEST_CASE("fused linear + gelu: a linear with another reader, or without gelu, stays unfused",
          "[model][fusion]") {
  const char* graph = R"(input(8)
a = linear(out=8)
g = gelu_tanh
b = linear(input, out=8)
h = gelu_tanh(b)
c = linear(b, out=8)
s = add(g, h)
t = add(s, c)
r = relu
fc = linear(out=3)
)";
  for (const DType precision : {DType::f32, DType::bf16, DType::f16}) {
    INFO(dtype_name(precision));
    auto m =
        Model::build(ModelSpec::parse(graph), {8}, 3, options(precision, true, LinearGelu::on, 4));
    // `a` reads the model's input, narrowed to the storage dtype: it fuses.
    CHECK(m->layer_kernels(node_named(*m, "a")) == "forward fused into g");
    CHECK(m->layer_kernels(node_named(*m, "g")).rfind("fused a+g: CPU twin", 0) == 0);
    CHECK(m->layer_kernels(node_named(*m, "b")).empty());  // also read by c
    CHECK(m->layer_kernels(node_named(*m, "h")).empty());
    CHECK(m->layer_kernels(node_named(*m, "fc")).empty());  // read by the loss alone: no gelu
  }
}

TEST_CASE("fused linear + gelu: under fp32 the twin is the unfused plan's bits on gpt-nano",
          "[model][fusion][precision]") {
  const std::string preset = GENERATE(std::string("gpt-nano"), std::string("gpt-nano:dropout=0.1"));
  INFO(preset);
  const ModelSpec spec = ModelSpec::parse(preset);
  auto fused = Model::build(spec, {kContext}, kVocab, options(DType::f32, true, LinearGelu::on));
  auto plain = Model::build(spec, {kContext}, kVocab, options(DType::f32, false, LinearGelu::on));
  REQUIRE(count_prefixed(*fused, "forward fused into ") == 4);
  REQUIRE(differing(bits_of(fused->params()), bits_of(plain->params())) == 0);
  std::vector<float> ids1, ids2;
  std::vector<std::int32_t> labels1, labels2;
  tokens(51, ids1, labels1);
  tokens(52, ids2, labels2);
  const auto compare = [&](const char* what) {
    INFO(what);
    check_same_logits_and_grads(*fused, *plain, kBatch * kContext * kVocab);
  };
  double loss[2];
  int k = 0;
  for (Model* m : {fused.get(), plain.get()}) {
    m->set_dropout_context(0, 1);
    loss[k++] = m->forward(ids1.data(), labels1.data(), kBatch, true).loss_sum;
    m->backward(1.0f, false);
  }
  CHECK(std::isfinite(loss[0]));
  CHECK(loss[0] == loss[1]);
  compare("a training step");
  const std::vector<std::uint32_t> g = bits_of(fused->grads());
  CHECK(std::count(g.begin(), g.end(), 0u) < static_cast<std::ptrdiff_t>(g.size() / 4));
  k = 0;
  for (Model* m : {fused.get(), plain.get()}) {
    m->set_dropout_context(0, 2);
    loss[k++] = m->forward(ids2.data(), labels2.data(), kBatch, true).loss_sum;
    m->backward(1.0f, true);
  }
  CHECK(loss[0] == loss[1]);
  compare("a second, accumulated step");
  k = 0;
  for (Model* m : {fused.get(), plain.get()})
    loss[k++] = m->forward(ids2.data(), labels2.data(), kBatch, false).loss_sum;
  CHECK(loss[0] == loss[1]);
  compare("evaluation");
}

TEST_CASE("fused linear + gelu: under bf16/fp16 gpt-nano's twin stays near the unfused plan",
          "[model][fusion][precision]") {
  const DType precision = GENERATE(DType::bf16, DType::f16);
  INFO(dtype_name(precision));
  const ModelSpec spec = ModelSpec::parse("gpt-nano");
  auto fused = Model::build(spec, {kContext}, kVocab, options(precision, true, LinearGelu::on));
  auto plain = Model::build(spec, {kContext}, kVocab, options(precision, false, LinearGelu::on));
  std::vector<float> ids;
  std::vector<std::int32_t> labels;
  tokens(53, ids, labels);
  const float scale = precision == DType::f16 ? 1024.0f : 1.0f;
  double loss[2];
  int k = 0;
  for (Model* m : {fused.get(), plain.get()}) {
    loss[k++] = m->forward(ids.data(), labels.data(), kBatch, true).loss_sum;
    m->backward(scale, false);
  }
  INFO("loss sums " << loss[0] << " (fused) and " << loss[1] << " (unfused)");
  REQUIRE(std::isfinite(loss[0]));
  // One rounding less per MLP element: the loss moves by far less than its
  // 16-bit storage's own error (2^-8 relative in bf16).
  CHECK(std::abs(loss[0] - loss[1]) <= 1e-3 * std::abs(loss[1]));
  const std::size_t n = kBatch * kContext * kVocab;
  std::vector<float> a(n), b(n);
  fused->copy_logits(0, a.data(), n);
  plain->copy_logits(0, b.data(), n);
  // The twin's arithmetic is in effect (one rounding, not two: some words differ).
  CHECK(differing(bits_of(a.data(), n), bits_of(b.data(), n)) > 0);
  // Every parameter gradient within a few 16-bit steps of the unfused plan's,
  // measured against the gradients' scale.
  const auto* ga = static_cast<const float*>(fused->grads().ptr);
  const auto* gb = static_cast<const float*>(plain->grads().ptr);
  double diff = 0.0, norm = 0.0;
  for (std::size_t i = 0; i < fused->param_count(); ++i) {
    diff += (static_cast<double>(ga[i]) - gb[i]) * (static_cast<double>(ga[i]) - gb[i]);
    norm += static_cast<double>(gb[i]) * gb[i];
  }
  INFO("relative gradient difference " << std::sqrt(diff / norm));
  CHECK(norm > 0.0);
  CHECK(std::sqrt(diff / norm) <= (precision == DType::bf16 ? 3e-2 : 5e-3));
}

TEST_CASE("fused linear + gelu ops: the twin against the unfused pair and float64",
          "[ops][fusion][precision]") {
  const DType precision = GENERATE(DType::f32, DType::bf16, DType::f16);
  const auto ctx = ComputeContext::create(Device::cpu(), Tf32Mode::off, precision);
  // Sizes around the chunk of the gelu loop (512) and odd ones; 0 rows too.
  const std::size_t rows = GENERATE(0u, 1u, 5u, 37u);
  const std::size_t in = GENERATE(3u, 33u), out = GENERATE(8u, 12u, 40u);
  INFO(dtype_name(precision) << ": " << rows << " rows, " << in << " -> " << out);
  LinearLayer linear("fc", Shape{in}, out, *ctx);
  ElementwiseActivationLayer gelu("gelu", Shape{out}, *ctx, kGeluTanhActivation);
  // Weights on the grid (the model's compute copy is), a bias of either sign
  // larger than most products, so that where it is added shows.
  std::vector<float> params = hashed_vector(61, out * in + out, -0.8f, 0.8f);
  for (std::size_t i = 0; i < out * in; ++i)
    params[i] = kernels::round_to_precision_grid(params[i], precision);
  for (std::size_t j = 0; j < out; ++j) params[out * in + j] *= 3.0f;
  std::vector<float> grads(params.size());
  linear.bind(params.data(), grads.data());
  const std::size_t nx = rows * in, ny = rows * out;
  const auto tensor = [&](std::size_t n) {
    return Tensor::empty({std::max<std::size_t>(n, 1)}, precision, Device::cpu());
  };
  const auto view = [](Tensor& t, std::size_t n) { return t.buffer().slice(0, n); };
  std::vector<float> x_wide = hashed_vector(62, nx, -2.0f, 2.0f);
  Tensor x = tensor(nx);
  convert_storage(*ctx, view(x, nx), view_of(x_wide.data(), nx));
  convert_storage(*ctx, view_of(x_wide.data(), nx), view(x, nx));  // x as stored
  // The unfused pair: the linear's fp32 product rounded, then gelu of it.
  std::vector<float> sum(std::max<std::size_t>(ny, 1));
  linear.forward(x_wide.data(), sum.data(), rows, true);
  Tensor pre_a = tensor(ny), y_a = tensor(ny);
  convert_storage(*ctx, view(pre_a, ny), view_of(sum.data(), ny));
  gelu_tanh_forward(*ctx, view(pre_a, ny), view(y_a, ny));
  // The fused node's twin.
  auto workspace =
      std::make_shared<LayerWorkspace>(*ctx, FusedLinearGelu::workspace_floats(linear), rows);
  FusedLinearGelu fused(linear, gelu, *ctx, {"fc", "gelu"}, workspace);
  Tensor pre_b = tensor(ny), y_b = tensor(ny);
  fused.forward(view(x, nx), view(pre_b, ny), view(y_b, ny), rows, true);
  // The auxiliary is the unfused pre-activation, bit for bit.
  CHECK(std::memcmp(pre_a.data(), pre_b.data(), ny * dtype_size(precision)) == 0);
  if (precision == DType::f32) {
    CHECK(std::memcmp(y_a.data(), y_b.data(), ny * sizeof(float)) == 0);
    return;
  }
  const std::vector<float> pre = values(pre_b), ya = values(y_a), yb = values(y_b);
  double dist_a = 0.0, dist_b = 0.0, slack = 0.0;
  std::size_t far_from_unfused = 0, far_from_exact = 0, differ = 0;
  for (std::size_t r = 0; r < rows; ++r)
    for (std::size_t j = 0; j < out; ++j) {
      const std::size_t i = r * out + j;
      double p64 = params[out * in + j], abs_sum = std::abs(p64);
      for (std::size_t q = 0; q < in; ++q) {
        const double prod = static_cast<double>(x_wide[r * in + q]) * params[j * in + q];
        p64 += prod;
        abs_sum += std::abs(prod);
      }
      const double ref = gelu_tanh64(p64);
      // fp32's sum within (in + 2) roundings of 2^-24 of partial sums, and
      // fp32's gelu (tanh by one expf) within a few ulp; gelu' <= 1.13.
      const double sum_error = static_cast<double>(in + 2) * 0x1.0p-24 * abs_sum;
      const double fp32 = 1.2 * sum_error + 0x1.0p-20 * (std::abs(ref) + std::abs(p64)) + 1e-30;
      // The twin: gelu of the fp32 sum rounded once.
      const double half_step =
          0.5 * std::max(grid_step(ref, precision), grid_step(yb[i], precision));
      if (!(std::abs(yb[i] - ref) <= half_step + fp32)) ++far_from_exact;
      // The unfused pair: gelu of the rounded sum, rounded; one rounding of
      // the pre-activation away (through gelu' <= 1.13) and one of y.
      const double one_rounding = 1.2 * 0.5 * grid_step(pre[i], precision) +
                                  grid_step(std::max(std::abs(ya[i]), std::abs(yb[i])), precision) +
                                  fp32;
      if (!(std::abs(ya[i] - yb[i]) <= one_rounding)) ++far_from_unfused;
      differ += ya[i] != yb[i];
      dist_a += std::abs(ya[i] - ref);
      dist_b += std::abs(yb[i] - ref);
      slack += fp32;
    }
  INFO(far_from_exact << " beyond half a step of float64, " << far_from_unfused
                      << " beyond one rounding of the unfused pair, " << differ << " of " << ny
                      << " differ; summed distance to float64: twin " << dist_b << ", unfused "
                      << dist_a);
  CHECK(far_from_exact == 0);
  CHECK(far_from_unfused == 0);
  CHECK(dist_b <= dist_a + slack);
}

TEST_CASE("fused linear + gelu: gradients match finite differences in fp32",
          "[model][fusion][gradient]") {
  // `a` reads the model's input; `c` a gelu's output; both pairs fuse.
  const char* graph = R"(input(5)
a = linear(out=8)
g = gelu_tanh
c = linear(out=6)
h = gelu_tanh
fc = linear(out=3)
)";
  const std::size_t batch = 4;
  auto m = Model::build(ModelSpec::parse(graph), {5}, 3,
                        options(DType::f32, true, LinearGelu::on, batch));
  REQUIRE(m->layer_kernels(node_named(*m, "a")) == "forward fused into g");
  REQUIRE(m->layer_kernels(node_named(*m, "c")) == "forward fused into h");
  const std::vector<float> x = hashed_vector(8, batch * 5, -1.5f, 1.5f);
  const std::vector<std::int32_t> labels{0, 2, 1, 2};
  check_parameter_gradients(*m, hashed_vector(7, m->param_count(), -0.8f, 0.8f), x, labels);
  // A batch of no samples runs nothing and zeroes the gradients.
  m->forward(x.data(), labels.data(), 0, true);
  m->backward(1.0f, false);
  const std::vector<std::uint32_t> g = bits_of(m->grads());
  CHECK(std::count(g.begin(), g.end(), 0u) == static_cast<std::ptrdiff_t>(g.size()));
}
