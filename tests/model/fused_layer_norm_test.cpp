// Fused residual add + LayerNorm (--fuse, the plan's rewrite) against the
// unfused plan, which stays the reference: on gpt-nano (with and without
// dropout) under fp32, bf16 and fp16 storage, the logits, the loss and every
// parameter gradient are the same bits, in training (one backward, then one
// accumulated) and in evaluation. Also: which nodes fuse (and which must
// not), names, parameters and activation memory unchanged, the plain
// ops against the fused ones, and a finite-difference check through the fused
// nodes.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "ringtrain/model/model.h"
#include "ringtrain/model/model_spec.h"
#include "ringtrain/ops/compute_context.h"
#include "ringtrain/ops/merge.h"
#include "ringtrain/ops/precision.h"
#include "ringtrain/ops/residual_layer_norm.h"
#include "ringtrain/ops/transformer_ops.h"
#include "ringtrain/tensor/tensor.h"
#include "tests/model/plan_bits.h"
#include "tests/model/test_data.h"

using namespace ringtrain;
using namespace ringtrain::test;

namespace {

constexpr std::size_t kContext = 128, kVocab = 64, kBatch = 2;

ModelOptions options(DType precision, bool fuse, std::size_t max_batch = kBatch) {
  ModelOptions o;
  o.device = Device::cpu();
  o.seed = 11;
  o.max_batch = max_batch;
  o.precision = precision;
  o.fuse = fuse;
  return o;
}

// Token ids and next-token labels, a function of (salt, index).
void tokens(std::uint64_t salt, std::vector<float>& ids, std::vector<std::int32_t>& labels) {
  test::hashed_tokens(salt, kBatch * kContext, kVocab, ids, labels);
}

}  // namespace

TEST_CASE("fused add + layer_norm: which nodes fuse on gpt-nano, names and parameters unchanged",
          "[model][fusion]") {
  const ModelSpec spec = ModelSpec::parse("gpt-nano");
  auto fused = Model::build(spec, {kContext}, kVocab, options(DType::f32, true));
  auto plain = Model::build(spec, {kContext}, kVocab, options(DType::f32, false));
  REQUIRE(fused->layer_count() == plain->layer_count());
  for (std::size_t i = 0; i < fused->layer_count(); ++i) {
    CHECK(fused->layer_name(i) == plain->layer_name(i));
    CHECK(fused->layer_kind(i) == plain->layer_kind(i));
    CHECK(fused->node_inputs(i) == plain->node_inputs(i));  // the graph as written
    CHECK(fused->layer_param_range(i) == plain->layer_param_range(i));
  }
  REQUIRE(fused->param_info().size() == plain->param_info().size());
  for (std::size_t k = 0; k < fused->param_info().size(); ++k)
    CHECK(fused->param_info()[k].name == plain->param_info()[k].name);
  const auto kernels = [&](const std::string& node) {
    return fused->layer_kernels(node_named(*fused, node));
  };
  // Block 0's ln_1 reads the position embedding, not an add.
  CHECK(kernels("h.0.ln_1").empty());
  for (int b = 0; b < 4; ++b) {
    const std::string h = "h." + std::to_string(b);
    CHECK(kernels(h + ".ln_2") == "fused " + h + ".attn_residual+" + h + ".ln_2");
    CHECK(kernels(h + ".attn_residual") == "folded into " + h + ".ln_2");
    const std::string next = b < 3 ? "h." + std::to_string(b + 1) + ".ln_1" : "ln_f";
    CHECK(kernels(next) == "fused " + h + ".mlp_residual+" + next);
    CHECK(kernels(h + ".mlp_residual") == "folded into " + next);
  }
  std::size_t count = 0;
  for (std::size_t i = 0; i < fused->layer_count(); ++i)
    count += fused->layer_kernels(i).rfind("fused ", 0) == 0;
  CHECK(count == 8);
  for (std::size_t i = 0; i < plain->layer_count(); ++i)
    CHECK(plain->layer_kernels(i).rfind("fused ", 0) != 0);
  // The folded adds keep their sums (the next add reads them); the gradient
  // slots may only shrink (ln_f's sum gradient is never stored).
  CHECK(fused->activation_bytes_per_sample() <= plain->activation_bytes_per_sample());
}

TEST_CASE(
    "fused add + layer_norm: a sum with a reader before the layer_norm, or of the input, "
    "stays unfused",
    "[model][fusion]") {
  const char* graph = R"(input(8)
a = linear(out=8)
s0 = add(input, a)
n0 = layer_norm
b = linear(out=8)
s1 = add(n0, b)
early = linear(s1, out=8)
n1 = layer_norm(s1)
s2 = add(n1, early)
n2 = layer_norm
fc = linear(out=3)
)";
  auto m = Model::build(ModelSpec::parse(graph), {8}, 3, options(DType::f32, true, 4));
  CHECK(m->layer_kernels(node_named(*m, "n0")).empty());  // reads the model input
  CHECK(m->layer_kernels(node_named(*m, "n1")).empty());  // `early` reads s1 first
  CHECK(m->layer_kernels(node_named(*m, "n2")) == "fused s2+n2");
}

TEST_CASE("fused add + layer_norm: gpt-nano gives the unfused plan's bits, training and evaluation",
          "[model][fusion][precision]") {
  const auto precision = GENERATE(DType::f32, DType::bf16, DType::f16);
  const std::string preset = GENERATE(std::string("gpt-nano"), std::string("gpt-nano:dropout=0.1"));
  INFO("precision " << dtype_name(precision) << ", " << preset);
  const ModelSpec spec = ModelSpec::parse(preset);
  auto fused = Model::build(spec, {kContext}, kVocab, options(precision, true));
  auto plain = Model::build(spec, {kContext}, kVocab, options(precision, false));
  REQUIRE(differing(bits_of(fused->params()), bits_of(plain->params())) == 0);
  std::vector<float> ids1, ids2;
  std::vector<std::int32_t> labels1, labels2;
  tokens(41, ids1, labels1);
  tokens(42, ids2, labels2);
  const float scale = precision == DType::f16 ? 1024.0f : 1.0f;
  const auto compare = [&](const char* what) {
    INFO(what);
    check_same_logits_and_grads(*fused, *plain, kBatch * kContext * kVocab);
  };
  double loss[2];
  int k = 0;
  for (Model* m : {fused.get(), plain.get()}) {
    m->set_dropout_context(0, 1);
    loss[k++] = m->forward(ids1.data(), labels1.data(), kBatch, true).loss_sum;
    m->backward(scale, false);
  }
  CHECK(std::isfinite(loss[0]));
  CHECK(loss[0] == loss[1]);
  compare("a training step");
  // The gradients are not all zero (the comparison would prove nothing).
  const std::vector<std::uint32_t> g = bits_of(fused->grads());
  CHECK(std::count(g.begin(), g.end(), 0u) < static_cast<std::ptrdiff_t>(g.size() / 4));
  k = 0;
  for (Model* m : {fused.get(), plain.get()}) {
    m->set_dropout_context(0, 2);
    loss[k++] = m->forward(ids2.data(), labels2.data(), kBatch, true).loss_sum;
    m->backward(scale, true);
  }
  CHECK(loss[0] == loss[1]);
  compare("a second, accumulated step");
  k = 0;
  for (Model* m : {fused.get(), plain.get()})
    loss[k++] = m->forward(ids2.data(), labels2.data(), kBatch, false).loss_sum;
  CHECK(loss[0] == loss[1]);
  compare("evaluation");
}

TEST_CASE("residual_layer_norm ops: the plain add, layer_norm and summed gradient's bits",
          "[ops][fusion][precision]") {
  const auto precision = GENERATE(DType::f32, DType::bf16, DType::f16);
  const bool summed = GENERATE(false, true);
  const float scale = GENERATE(1.0f, 0.5f);
  INFO("precision " << dtype_name(precision) << (summed ? ", summed" : "") << ", scale " << scale);
  const auto ctx = ComputeContext::create(Device::cpu(), Tf32Mode::off, precision);
  // Row widths around a warp's multiples; 0 rows too.
  const std::size_t rows = GENERATE(0u, 1u, 5u), c = GENERATE(1u, 31u, 33u, 96u);
  const std::size_t n = rows * c;
  const auto stored = [&](std::uint64_t salt, float lo, float hi) {
    Tensor wide = Tensor::empty({std::max<std::size_t>(n, 1)}, DType::f32, Device::cpu());
    const std::vector<float> v = test::hashed_vector(salt, n, lo, hi);
    std::copy(v.begin(), v.end(), wide.data_as<float>());
    Tensor t = Tensor::empty({std::max<std::size_t>(n, 1)}, precision, Device::cpu());
    convert_storage(*ctx, t.buffer().slice(0, n), wide.buffer().slice(0, n));
    return t;
  };
  const auto view = [&](Tensor& t) { return t.buffer().slice(0, n); };
  Tensor x0 = stored(1, -2.0f, 2.0f), x1 = stored(2, -1.0f, 3.0f), dy = stored(3, -1.0f, 1.0f);
  const std::vector<float> w = test::hashed_vector(4, c, 0.5f, 1.5f);
  const std::vector<float> b = test::hashed_vector(5, c, -0.5f, 0.5f);
  // The sum's earlier gradient: fp32 where summed, else the storage dtype.
  std::vector<float> earlier = test::hashed_vector(6, n, -0.5f, 0.5f);
  for (float& e : earlier) e = e * 3.0f;  // not on any 16-bit grid
  const DType g_type = summed ? DType::f32 : precision;
  // Plain: add, layer_norm, layer_norm's dx added to the earlier gradient
  // (or written as the gradient), rounded, then the add's backward.
  Tensor sum_a = Tensor::empty({std::max<std::size_t>(n, 1)}, precision, Device::cpu());
  Tensor y_a = Tensor::empty({std::max<std::size_t>(n, 1)}, precision, Device::cpu());
  std::vector<float> mean_a(rows + 1), rstd_a(rows + 1), dw_a(c, 0.25f), db_a(c, -0.25f);
  sum_two_stored(*ctx, view(sum_a), view(x0), view(x1), scale);
  layer_norm_forward(*ctx, view(sum_a), w.data(), b.data(), rows, c, 1e-5f, view(y_a),
                     mean_a.data(), rstd_a.data());
  Tensor g_a = Tensor::empty({std::max<std::size_t>(n, 1)}, g_type, Device::cpu());
  Tensor dx_a = Tensor::empty({std::max<std::size_t>(n, 1)}, DType::f32, Device::cpu());
  if (summed) {
    std::copy(earlier.begin(), earlier.end(), g_a.data_as<float>());
    layer_norm_backward(*ctx, view(sum_a), w.data(), view(dy), rows, c, mean_a.data(),
                        rstd_a.data(), dx_a.buffer().slice(0, n), dw_a.data(), db_a.data(), true);
    add_scaled(*ctx, g_a.data_as<float>(), dx_a.data_as<float>(), 1.0f, n);
    if (precision != DType::f32)
      round_to_precision(*ctx, g_a.data_as<float>(), g_a.data_as<float>(), n, precision);
  } else {
    layer_norm_backward(*ctx, view(sum_a), w.data(), view(dy), rows, c, mean_a.data(),
                        rstd_a.data(), view(g_a), dw_a.data(), db_a.data(), true);
  }
  Tensor narrowed = Tensor::empty({std::max<std::size_t>(n, 1)}, precision, Device::cpu());
  convert_storage(*ctx, view(narrowed), view(g_a));
  Tensor dx0_a = Tensor::empty({std::max<std::size_t>(n, 1)}, DType::f32, Device::cpu());
  Tensor dx1_a = Tensor::empty({std::max<std::size_t>(n, 1)}, precision, Device::cpu());
  scale_stored(*ctx, view(dx0_a), view(narrowed), 1.0f);
  scale_stored(*ctx, view(dx1_a), view(narrowed), scale);
  // Fused.
  Tensor sum_b = Tensor::empty({std::max<std::size_t>(n, 1)}, precision, Device::cpu());
  Tensor y_b = Tensor::empty({std::max<std::size_t>(n, 1)}, precision, Device::cpu());
  std::vector<float> mean_b(rows + 1), rstd_b(rows + 1), dw_b(c, 0.25f), db_b(c, -0.25f);
  residual_layer_norm_forward(*ctx, view(x0), view(x1), scale, w.data(), b.data(), rows, c, 1e-5f,
                              view(sum_b), view(y_b), mean_b.data(), rstd_b.data());
  Tensor g_b = Tensor::empty({std::max<std::size_t>(n, 1)}, g_type, Device::cpu());
  if (summed) std::copy(earlier.begin(), earlier.end(), g_b.data_as<float>());
  Tensor dx0_b = Tensor::empty({std::max<std::size_t>(n, 1)}, DType::f32, Device::cpu());
  Tensor dx1_b = Tensor::empty({std::max<std::size_t>(n, 1)}, precision, Device::cpu());
  residual_layer_norm_backward(*ctx, view(sum_b), w.data(), view(dy), rows, c, mean_b.data(),
                               rstd_b.data(), view(g_b), summed, scale, view(dx0_b), view(dx1_b),
                               dw_b.data(), db_b.data(), true);
  const auto same = [&](const Tensor& u, const Tensor& v) {
    return std::memcmp(u.data(), v.data(), n * dtype_size(u.dtype())) == 0;
  };
  CHECK(same(sum_a, sum_b));
  CHECK(same(y_a, y_b));
  CHECK(same(dx0_a, dx0_b));
  CHECK(same(dx1_a, dx1_b));
  CHECK(differing(bits_of(mean_a.data(), rows), bits_of(mean_b.data(), rows)) == 0);
  CHECK(differing(bits_of(rstd_a.data(), rows), bits_of(rstd_b.data(), rows)) == 0);
  CHECK(differing(bits_of(dw_a.data(), c), bits_of(dw_b.data(), c)) == 0);
  CHECK(differing(bits_of(db_a.data(), c), bits_of(db_b.data(), c)) == 0);
  // A not-wanted input gradient is skipped.
  residual_layer_norm_backward(*ctx, view(sum_b), w.data(), view(dy), rows, c, mean_b.data(),
                               rstd_b.data(), view(g_b), summed, scale, view(dx0_b),
                               BufferView{nullptr, 0, precision, Device::cpu()}, dw_b.data(),
                               db_b.data(), false);
  CHECK(same(dx0_a, dx0_b));
}

TEST_CASE("fused add + layer_norm: gradients match finite differences in fp32",
          "[model][fusion][gradient]") {
  // s is read by n (fused with it) and by d and s2 after it: its gradient sums
  // three readers; s2 (scaled) by n2 alone.
  const char* graph = R"(input(5)
a = linear(out=6)
b = linear(input, out=6)
s = add(a, b)
n = layer_norm
c = linear(out=6)
d = linear(s, out=6)
s2 = add(s, c, scale=0.5)
n2 = layer_norm
e = add(n2, d)
fc = linear(out=3)
)";
  const std::size_t batch = 4;
  auto m = Model::build(ModelSpec::parse(graph), {5}, 3, options(DType::f32, true, batch));
  REQUIRE(m->layer_kernels(node_named(*m, "n")) == "fused s+n");
  REQUIRE(m->layer_kernels(node_named(*m, "n2")) == "fused s2+n2");
  const std::vector<float> x = test::hashed_vector(4, batch * 5, -1.5f, 1.5f);
  const std::vector<std::int32_t> labels{0, 2, 1, 2};
  check_parameter_gradients(*m, test::hashed_vector(3, m->param_count(), -0.6f, 0.6f), x, labels);
}
