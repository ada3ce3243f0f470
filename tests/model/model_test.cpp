// Model assembly: flat buffers and their recorded order, seeded init, the
// backward callbacks, gradient accumulation, external gradient buffers,
// dropout reproducibility, and a finite-difference check of a whole model
// with every layer kind.
#include <catch2/catch.hpp>

#include <cmath>
#include <numeric>

#include "kernels/precision.cuh"
#include "ringtrain/core/error.h"
#include "ringtrain/launch/gpu_runtime.h"
#include "ringtrain/model/model.h"
#include "tests/model/test_data.h"

using namespace ringtrain;

namespace {
ModelOptions cpu_options(std::uint64_t seed = 3, std::size_t max_batch = 16) {
  ModelOptions o;
  o.device = Device::cpu();
  o.seed = seed;
  o.max_batch = max_batch;
  return o;
}

std::vector<std::int32_t> labels_for(std::size_t n, int classes) {
  std::vector<std::int32_t> l(n);
  for (std::size_t i = 0; i < n; ++i)
    l[i] = static_cast<std::int32_t>((i * 7 + 3) % static_cast<std::size_t>(classes));
  return l;
}

std::vector<float> copy_of(const BufferView& v) {
  const float* p = v.as<float>();
  return std::vector<float>(p, p + v.count);
}

const char* kAllLayers =
    "conv2d(out=3, kernel=3, stride=1, padding=1); relu; max_pool2d(kernel=2); "
    "conv2d(out=4, kernel=3, stride=2, padding=1); gelu; flatten; dropout(p=0.3); linear(out=6); "
    "gelu; linear(out=5)";
}  // namespace

TEST_CASE("model: cnn preset has under 500k parameters in a recorded, contiguous order",
          "[model]") {
  auto m = Model::build(ModelSpec::parse("cnn"), {1, 28, 28}, 10, cpu_options());
  CHECK(m->param_count() < 500000);
  CHECK(m->param_count() == 421642);
  const auto& info = m->param_info();
  REQUIRE(info.size() == 8);
  CHECK(info[0].name == "conv1.weight");
  CHECK(info[0].shape == std::vector<std::size_t>{32, 1, 3, 3});
  CHECK(info[1].name == "conv1.bias");
  CHECK(info[2].name == "conv2.weight");
  CHECK(info[4].name == "fc1.weight");
  CHECK(info[4].shape == std::vector<std::size_t>{128, 3136});
  CHECK(info[7].name == "fc2.bias");
  std::size_t offset = 0;
  for (const ParamInfo& p : info) {
    CHECK(p.offset == offset);
    offset += p.count;
    const auto [b, e] = m->layer_param_range(p.layer);
    CHECK(p.offset >= b);
    CHECK(p.offset + p.count <= e);
  }
  CHECK(offset == m->param_count());
  CHECK(m->params().count == m->param_count());
  CHECK(m->grads().count == m->param_count());
  // Layers without parameters have empty ranges between their neighbours'.
  CHECK(m->layer_param_range(1).first == m->layer_param_range(1).second);
  CHECK(m->layer_name(0) == "conv1");
  CHECK(m->layer_output_shape(2) == std::vector<std::size_t>{32, 14, 14});
}

TEST_CASE("model: Kaiming init is seeded and scaled by fan-in", "[model]") {
  const ModelSpec spec = ModelSpec::parse("mlp:784-512-10");
  auto a = Model::build(spec, {784}, 10, cpu_options(1));
  auto b = Model::build(spec, {784}, 10, cpu_options(1));
  auto c = Model::build(spec, {1, 28, 28}, 10, cpu_options(2));
  const auto pa = copy_of(a->params()), pb = copy_of(b->params()), pc = copy_of(c->params());
  CHECK(pa == pb);
  CHECK(pa != pc);
  const ParamInfo& w = a->param_info()[0];
  double sum = 0, sq = 0;
  for (std::size_t i = 0; i < w.count; ++i) {
    sum += pa[w.offset + i];
    sq += static_cast<double>(pa[w.offset + i]) * pa[w.offset + i];
  }
  const double mean = sum / static_cast<double>(w.count);
  const double var = sq / static_cast<double>(w.count) - mean * mean;
  CHECK(std::abs(mean) < 0.002);
  CHECK(var == Approx(2.0 / 784).epsilon(0.02));
  const ParamInfo& bias = a->param_info()[1];
  for (std::size_t i = 0; i < bias.count; ++i) CHECK(pa[bias.offset + i] == 0.0f);
}

TEST_CASE("model: shape and class mismatches are clear errors", "[model]") {
  using Catch::Contains;
  CHECK_THROWS_WITH(Model::build(ModelSpec::parse("mlp:784-10"), {3, 32, 32}, 10, cpu_options()),
                    Contains("expects input [784]") && Contains("[3, 32, 32]"));
  CHECK_THROWS_WITH(Model::build(ModelSpec::parse("mlp:784-10"), {784}, 7, cpu_options()),
                    Contains("7 classes"));
  CHECK_THROWS_WITH(Model::build(ModelSpec::parse("linear(out=4)"), {2, 3, 3}, 4, cpu_options()),
                    Contains("flatten"));
  CHECK_THROWS_WITH(Model::build(ModelSpec::parse("conv2d(4, 5); flatten; linear(2)"), {1, 3, 3}, 2,
                                 cpu_options()),
                    Contains("does not fit"));
  auto m = Model::build(ModelSpec::parse("mlp:4-3"), {4}, 3, cpu_options(1, 2));
  std::vector<float> x(12, 0.5f);
  std::vector<std::int32_t> l(3, 1);
  CHECK_THROWS_WITH(m->forward(x.data(), l.data(), 3, true),
                    Contains("exceeds the model's max_batch 2"));
  l[1] = 3;
  CHECK_THROWS_WITH(m->forward(x.data(), l.data(), 2, true), Contains("label 3 of batch row 1"));
  CHECK_THROWS_WITH(m->bind_gradient_buffer(view_of(x.data(), 5)), Contains("has 15 parameters"));
  if (!cuda_compiled()) {
    ModelOptions gpu = cpu_options();
    gpu.device = Device::cuda(0);
    CHECK_THROWS_WITH(Model::build(ModelSpec::parse("mlp:4-3"), {4}, 3, gpu),
                      Contains("without CUDA"));
  }
}

TEST_CASE("model: whole-model gradients match finite differences", "[model][gradient]") {
  auto m = Model::build(ModelSpec::parse(kAllLayers), {2, 6, 6}, 5, cpu_options(11));
  m->set_dropout_context(1, 4);
  const std::size_t batch = 3;
  const auto x = test::hashed_vector(61, batch * 72);
  const auto labels = labels_for(batch, 5);
  const float grad_scale = 2.0f;
  m->forward(x.data(), labels.data(), batch, true);
  m->backward(grad_scale, false);
  const auto analytic = copy_of(m->grads());
  float* p = m->params().as<float>();
  // A small step: ReLU and max-pool bend, and a large step crosses a bend.
  const float eps = 1e-3f;
  std::size_t checked = 0;
  for (std::size_t i = 0; i < m->param_count(); ++i) {
    const float keep = p[i];
    p[i] = keep + eps;
    const double lp = m->forward(x.data(), labels.data(), batch, true).loss_sum / batch;
    p[i] = keep - eps;
    const double lm = m->forward(x.data(), labels.data(), batch, true).loss_sum / batch;
    p[i] = keep;
    const double numeric = grad_scale * (lp - lm) / (2.0 * eps);
    INFO("parameter " << i << ": analytic " << analytic[i] << " numeric " << numeric);
    CHECK(std::abs(analytic[i] - numeric) <= 2e-3 + 3e-2 * std::abs(numeric));
    ++checked;
  }
  CHECK(checked == m->param_count());
}

TEST_CASE("model: backward callbacks, accumulation and external gradient buffers", "[model]") {
  auto m = Model::build(ModelSpec::parse(kAllLayers), {2, 6, 6}, 5, cpu_options(5));
  const std::size_t batch = 4;
  const auto x1 = test::hashed_vector(71, batch * 72), x2 = test::hashed_vector(72, batch * 72);
  const auto labels = labels_for(batch, 5);

  std::vector<std::size_t> order;
  m->forward(x1.data(), labels.data(), batch, true);
  m->backward(1.0f, false, [&](std::size_t layer) {
    order.push_back(layer);
    // Everything at and after this layer's range is final by now.
    const auto [b, e] = m->layer_param_range(layer);
    CHECK(e <= m->param_count());
    (void)b;
  });
  std::vector<std::size_t> expect(m->layer_count());
  std::iota(expect.rbegin(), expect.rend(), 0);
  CHECK(order == expect);
  const auto g1 = copy_of(m->grads());

  m->forward(x2.data(), labels.data(), batch, true);
  m->backward(1.0f, false);
  const auto g2 = copy_of(m->grads());
  m->forward(x1.data(), labels.data(), batch, true);
  m->backward(1.0f, true);
  const auto sum = copy_of(m->grads());
  for (std::size_t i = 0; i < sum.size(); ++i) CHECK(sum[i] == Approx(g1[i] + g2[i]).margin(1e-5));

  // grad_scale scales every gradient.
  m->forward(x1.data(), labels.data(), batch, true);
  m->backward(0.5f, false);
  const auto half = copy_of(m->grads());
  for (std::size_t i = 0; i < half.size(); ++i) CHECK(half[i] == Approx(0.5f * g1[i]).margin(1e-6));

  // An external buffer receives the same gradients.
  std::vector<float> external(m->param_count(), 42.0f);
  m->bind_gradient_buffer(view_of(external.data(), external.size()));
  CHECK(m->grads().ptr == external.data());
  m->forward(x1.data(), labels.data(), batch, true);
  m->backward(1.0f, false);
  for (std::size_t i = 0; i < external.size(); ++i)
    CHECK(external[i] == Approx(g1[i]).margin(1e-6));
  m->zero_grads();
  for (float g : external) CHECK(g == 0.0f);

  // Batch 0: no loss, zero gradients, every callback still fires.
  external.assign(external.size(), 1.0f);
  const auto r = m->forward(x1.data(), labels.data(), 0, true);
  CHECK(r.loss_sum == 0.0);
  CHECK(r.correct == 0);
  order.clear();
  m->backward(1.0f, false, [&](std::size_t layer) { order.push_back(layer); });
  CHECK(order == expect);
  for (float g : external) CHECK(g == 0.0f);
}

TEST_CASE("model: dropout is reproducible per (seed, rank, step) and off in evaluation",
          "[model][dropout]") {
  const ModelSpec spec =
      ModelSpec::parse("flatten; linear(out=32); relu; dropout(p=0.5); linear(out=4)");
  auto a = Model::build(spec, {8}, 4, cpu_options(9));
  auto b = Model::build(spec, {8}, 4, cpu_options(9));
  const std::size_t batch = 5;
  const auto x = test::hashed_vector(81, batch * 8);
  const auto labels = labels_for(batch, 4);
  auto logits = [&](Model& m, std::uint64_t rank, std::uint64_t step, bool training) {
    m.set_dropout_context(rank, step);
    m.forward(x.data(), labels.data(), batch, training);
    std::vector<float> z(batch * 4);
    m.copy_logits(0, z.data(), z.size());
    return z;
  };
  CHECK(logits(*a, 0, 1, true) == logits(*b, 0, 1, true));
  CHECK(logits(*a, 0, 1, true) != logits(*a, 0, 2, true));
  CHECK(logits(*a, 0, 1, true) != logits(*a, 1, 1, true));
  CHECK(logits(*a, 0, 1, false) == logits(*a, 3, 9, false));
}

TEST_CASE("model: bf16 and fp16 store the matmul weights, activations and gradients on the grid",
          "[model][precision]") {
  const char* spec = "conv2d(out=4, kernel=3, padding=1); batch_norm; relu; flatten; linear(out=5)";
  const std::size_t batch = 4;
  const auto x = test::hashed_vector(17, batch * 2 * 6 * 6);
  const auto labels = labels_for(batch, 5);
  auto ref = Model::build(ModelSpec::parse(spec), {2, 6, 6}, 5, cpu_options(5));
  const double ref_loss = ref->forward(x.data(), labels.data(), batch, true).loss_sum;
  ref->backward(1.0f, false);
  const auto ref_grads = copy_of(ref->grads());
  for (const DType p : {DType::bf16, DType::f16}) {
    INFO(precision_name(p));
    ModelOptions o = cpu_options(5);
    o.precision = p;
    auto m = Model::build(ModelSpec::parse(spec), {2, 6, 6}, 5, o);
    const auto master = copy_of(m->params());
    CHECK(master == copy_of(ref->params()));  // the same fp32 master weights
    const double loss = m->forward(x.data(), labels.data(), batch, true).loss_sum;
    m->backward(1.0f, false);
    // The master weights are untouched; the logits are on the grid, and not
    // all of them are fp32's.
    CHECK(copy_of(m->params()) == master);
    // Stored in 16 bits, widened exactly.
    CHECK(m->logits().dtype == p);
    std::vector<float> logits(batch * 5), ref_logits(batch * 5);
    m->copy_logits(0, logits.data(), logits.size());
    ref->copy_logits(0, ref_logits.data(), ref_logits.size());
    std::size_t differ = 0;
    for (std::size_t i = 0; i < batch * 5; ++i) {
      CHECK(kernels::round_to_precision_grid(logits[i], p) == logits[i]);
      differ += logits[i] != ref_logits[i];
    }
    CHECK(differ > 0);
    // Within the format's tolerance of fp32: 8 (bf16) or 11 (fp16) significant bits.
    const double tol = p == DType::bf16 ? 3e-2 : 4e-3;
    CHECK(std::abs(loss - ref_loss) <= tol * std::abs(ref_loss));
    const auto grads = copy_of(m->grads());
    double num = 0, den = 0;
    for (std::size_t i = 0; i < grads.size(); ++i) {
      num += (grads[i] - ref_grads[i]) * (grads[i] - ref_grads[i]);
      den += ref_grads[i] * ref_grads[i];
    }
    CHECK(std::sqrt(num / den) <= 2 * tol);
  }
}
