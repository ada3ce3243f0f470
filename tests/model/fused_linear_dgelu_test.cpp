// The backward half of the linear + gelu_tanh fusion (model/
// fused_linear_dgelu.h): the gelu's reader (c_proj) runs its dx GEMM with
// cuBLASLt's DGELU_BGRAD epilogue, here through its CPU twin
// (ModelOptions::fuse_linear_gelu = on). The twin takes gelu' of the stored
// pre-activation times c_proj's fp32 dx and rounds once, where the unfused
// pair rounds dx first; c_fc's bias gradient is the sum of the unrounded
// values.
// - ops: d(pre) within one 16-bit rounding of the unfused pair's (and
//   within half a step of float64), and c_fc's dW, db and dx within what
//   those differences carry; under fp32 every one of them bit for bit;
// - plan: which readers fuse (gpt-nano: every c_proj), what the kernels
//   column says, and which must not (a gelu read by an add, or twice);
// - gpt-nano: training steps with it near --fuse off; --accum 2 near one
//   batch of 2 x B; a micro-batch of no samples keeps or zeroes the gradients.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/activation.cuh"
#include "kernels/precision.cuh"
#include "kernels/storage.cuh"
#include "model/linear_layer.h"
#include "ringtrain/model/model.h"
#include "ringtrain/model/model_spec.h"
#include "ringtrain/ops/activation.h"
#include "ringtrain/ops/bias.h"
#include "ringtrain/ops/compute_context.h"
#include "ringtrain/ops/linear_dgelu.h"
#include "ringtrain/ops/precision.h"
#include "ringtrain/tensor/tensor.h"
#include "tests/model/gelu_fusion_support.h"
#include "tests/model/plan_bits.h"
#include "tests/model/test_data.h"

using namespace ringtrain;
using namespace ringtrain::test;

namespace {

// GPT-2's gelu' in float64.
double gelu_tanh_derivative64(double x) {
  const double k = 0.7978845608028654;
  const double t = std::tanh(k * (x + 0.044715 * x * x * x));
  return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * k * (1.0 + 3.0 * 0.044715 * x * x);
}

std::vector<float> on_grid(std::uint64_t salt, std::size_t n, DType p, float lo = -1.0f,
                           float hi = 1.0f) {
  std::vector<float> v = hashed_vector(salt, n, lo, hi);
  for (float& x : v) x = kernels::round_to_precision_grid(x, p);
  return v;
}

std::size_t count_containing(const Model& m, const std::string& text) {
  std::size_t n = 0;
  for (std::size_t i = 0; i < m.layer_count(); ++i)
    n += m.layer_kernels(i).find(text) != std::string::npos;
  return n;
}

double relative_difference(const float* a, const float* b, std::size_t n) {
  double diff = 0.0, norm = 0.0;
  for (std::size_t i = 0; i < n; ++i) {
    diff += (static_cast<double>(a[i]) - b[i]) * (static_cast<double>(a[i]) - b[i]);
    norm += static_cast<double>(b[i]) * b[i];
  }
  return norm > 0.0 ? std::sqrt(diff / norm) : (diff > 0.0 ? 1.0 : 0.0);
}

}  // namespace

TEST_CASE("fused linear dgelu ops: the twin against the unfused pair, through c_fc's backward",
          "[ops][fusion][precision]") {
  const DType precision = GENERATE(DType::f32, DType::bf16, DType::f16);
  const auto ctx = ComputeContext::create(Device::cpu(), Tf32Mode::off, precision);
  // Sizes around the gelu loop's chunk (512) and odd ones.
  const std::size_t rows = GENERATE(1u, 5u, 37u);
  const std::size_t width = GENERATE(8u, 24u, 40u);
  const std::size_t din = 6, dout = 12;
  INFO(dtype_name(precision) << ": " << rows << " rows, c_fc " << din << " -> " << width
                             << ", c_proj -> " << dout);
  LinearLayer fc("fc", Shape{din}, width, *ctx);
  LinearLayer proj("proj", Shape{width}, dout, *ctx);
  // Weights on the grid (the model's compute copy is).
  std::vector<float> fc_params = on_grid(81, width * din + width, precision);
  std::vector<float> proj_params = on_grid(82, dout * width + dout, precision);
  std::vector<float> proj_grads(proj_params.size());
  proj.bind(proj_params.data(), proj_grads.data());
  // c_proj's fp32 dx of a 16-bit dy (its input is irrelevant to dx).
  const std::size_t n = rows * width;
  const std::vector<float> dy = on_grid(83, rows * dout, precision, -0.5f, 0.5f);
  const std::vector<float> gelu_out = on_grid(84, n, precision);
  std::vector<float> dx(n);
  proj.backward(gelu_out.data(), nullptr, dy.data(), dx.data(), rows, false);
  // The pre-activation as stored; wide enough that gelu' spans its range.
  const std::vector<float> pre_values = on_grid(85, n, precision, -4.0f, 4.0f);
  Tensor pre = Tensor::empty({n}, precision, Device::cpu());
  convert_storage(*ctx, pre.buffer(), view_of(pre_values.data(), n));
  const std::vector<float> x_fc = on_grid(86, rows * din, precision);

  // The unfused pair: dx rounded into gelu's gradient, gelu's stored
  // backward, then c_fc's backward on the widened d(pre).
  Tensor d_gelu = Tensor::empty({n}, precision, Device::cpu());
  convert_storage(*ctx, d_gelu.buffer(), view_of(dx.data(), n));
  Tensor d_pre_a = Tensor::empty({n}, precision, Device::cpu());
  gelu_tanh_backward(*ctx, pre.buffer(), d_gelu.buffer(), d_pre_a.buffer());
  std::vector<float> grads_a(fc_params.size()), dx_fc_a(rows * din);
  fc.bind(fc_params.data(), grads_a.data());
  const std::vector<float> dpre_a = values(d_pre_a, n);
  fc.backward(x_fc.data(), nullptr, dpre_a.data(), dx_fc_a.data(), rows, false);

  // The twin: c_fc's bias gradient from it, then c_fc's backward without its own.
  Tensor d_pre_b = Tensor::empty({n}, precision, Device::cpu());
  std::vector<float> grads_b(fc_params.size()), dx_fc_b(rows * din);
  fc.bind(fc_params.data(), grads_b.data());
  std::vector<float> sums = dx;  // overwritten with the fp32 d(pre)
  linear_dgelu_twin(*ctx, sums.data(), pre.buffer(), d_pre_b.buffer(), fc.bias_gradient(), rows,
                    width, false);
  const std::vector<float> dpre_b = values(d_pre_b, n);
  fc.set_bias_gradient_written(true);
  fc.backward(x_fc.data(), nullptr, dpre_b.data(), dx_fc_b.data(), rows, false);
  fc.set_bias_gradient_written(false);

  if (precision == DType::f32) {
    CHECK(std::memcmp(d_pre_a.data(), d_pre_b.data(), n * sizeof(float)) == 0);
    CHECK(differing(bits_of(grads_a.data(), grads_a.size()),
                    bits_of(grads_b.data(), grads_b.size())) == 0);
    CHECK(differing(bits_of(dx_fc_a.data(), dx_fc_a.size()),
                    bits_of(dx_fc_b.data(), dx_fc_b.size())) == 0);
    return;
  }
  // Per element: the twin is gelu'(pre) dx rounded once (half a step of
  // float64, plus fp32's gelu' error), and one rounding of dx (through gelu'
  // <= 1.13) plus one of d(pre) from the unfused pair's.
  std::vector<double> bound(n);
  double dist_a = 0.0, dist_b = 0.0, slack = 0.0;
  std::size_t far_from_exact = 0, far_from_unfused = 0, differ = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const double exact = gelu_tanh_derivative64(pre_values[i]) * dx[i];
    // fp32's gelu' (tanh by one expf) cancels where tanh nears -1: an
    // absolute error of a few 2^-21, times dx.
    const double fp32 = 0x1.0p-20 * std::abs(exact) + 0x1.0p-18 * std::abs(dx[i]) + 1e-30;
    if (!(std::abs(dpre_b[i] - exact) <=
          0.5 * std::max(grid_step(exact, precision), grid_step(dpre_b[i], precision)) + fp32)) {
      ++far_from_exact;
    }
    bound[i] = 1.2 * 0.5 * grid_step(dx[i], precision) +
               grid_step(std::max(std::abs(dpre_a[i]), std::abs(dpre_b[i])), precision) + fp32;
    if (!(std::abs(dpre_a[i] - dpre_b[i]) <= bound[i])) ++far_from_unfused;
    differ += dpre_a[i] != dpre_b[i];
    dist_a += std::abs(dpre_a[i] - exact);
    dist_b += std::abs(dpre_b[i] - exact);
    slack += fp32;
  }
  INFO(far_from_exact << " beyond half a step of float64, " << far_from_unfused
                      << " beyond one rounding of the unfused pair, " << differ << " of " << n
                      << " differ; summed distance to float64: twin " << dist_b << ", unfused "
                      << dist_a);
  CHECK(far_from_exact == 0);
  CHECK(far_from_unfused == 0);
  CHECK(dist_b <= dist_a + slack);
  // What those differences carry into c_fc's gradients (plus fp32 sums).
  const float* dw_a = grads_a.data();
  const float* dw_b = grads_b.data();
  const float* w_fc = fc_params.data();
  std::size_t far = 0;
  for (std::size_t j = 0; j < width; ++j) {
    double db_bound = 0.0, db_abs = 0.0;
    for (std::size_t r = 0; r < rows; ++r) {
      db_bound += bound[r * width + j];
      db_abs += std::abs(dpre_a[r * width + j]);
    }
    const double db_slack = static_cast<double>(rows + 1) * 0x1.0p-23 * (db_abs + db_bound);
    far += !(std::abs(grads_a[width * din + j] - grads_b[width * din + j]) <= db_bound + db_slack);
    // The twin's bias gradient is the sum of its unrounded fp32 values.
    double sum = 0.0;
    for (std::size_t r = 0; r < rows; ++r) sum += static_cast<float>(sums[r * width + j]);
    far += !(std::abs(grads_b[width * din + j] - sum) <= db_slack);
    for (std::size_t q = 0; q < din; ++q) {
      double dw_bound = 0.0, dw_abs = 0.0;
      for (std::size_t r = 0; r < rows; ++r) {
        dw_bound += std::abs(x_fc[r * din + q]) * bound[r * width + j];
        dw_abs += std::abs(x_fc[r * din + q] * dpre_a[r * width + j]);
      }
      const std::size_t at = j * din + q;
      far += !(std::abs(dw_a[at] - dw_b[at]) <=
               dw_bound + static_cast<double>(rows + 1) * 0x1.0p-23 * (dw_abs + dw_bound));
    }
  }
  for (std::size_t r = 0; r < rows; ++r)
    for (std::size_t q = 0; q < din; ++q) {
      double dx_bound = 0.0, dx_abs = 0.0;
      for (std::size_t j = 0; j < width; ++j) {
        dx_bound += bound[r * width + j] * std::abs(w_fc[j * din + q]);
        dx_abs += std::abs(dpre_a[r * width + j] * w_fc[j * din + q]);
      }
      const std::size_t at = r * din + q;
      far += !(std::abs(dx_fc_a[at] - dx_fc_b[at]) <=
               dx_bound + static_cast<double>(width + 1) * 0x1.0p-23 * (dx_abs + dx_bound));
    }
  CHECK(far == 0);
  // Accumulating, the sums are added to what the bias gradient holds.
  std::vector<float> db = hashed_vector(87, width);
  const std::vector<float> before = db;
  std::vector<float> again = dx;
  Tensor d_pre_c = Tensor::empty({n}, precision, Device::cpu());
  linear_dgelu_twin(*ctx, again.data(), pre.buffer(), d_pre_c.buffer(), db.data(), rows, width,
                    true);
  CHECK(std::memcmp(d_pre_c.data(), d_pre_b.data(), n * dtype_size(precision)) == 0);
  std::size_t not_added = 0;
  for (std::size_t j = 0; j < width; ++j) {
    const double want = static_cast<double>(before[j]) + grads_b[width * din + j];
    not_added += !(std::abs(db[j] - want) <=
                   static_cast<double>(rows + 2) * 0x1.0p-23 *
                       (std::abs(before[j]) + std::abs(grads_b[width * din + j]) + 1.0));
  }
  CHECK(not_added == 0);
}

TEST_CASE("fused linear dgelu: which readers fuse, and what the kernels column says",
          "[model][fusion]") {
  const DType precision = GENERATE(DType::f32, DType::bf16);
  INFO(dtype_name(precision));
  const ModelSpec spec = ModelSpec::parse("gpt-nano");
  auto forced = Model::build(spec, {kContext}, kVocab, options(precision, true, LinearGelu::on));
  auto never = Model::build(spec, {kContext}, kVocab, options(precision, true, LinearGelu::off));
  for (int b = 0; b < 4; ++b) {
    const std::string h = "h." + std::to_string(b) + ".mlp.";
    const auto kernels = [&](const std::string& node) {
      return forced->layer_kernels(node_named(*forced, node));
    };
    CHECK(kernels(h + "c_proj") ==
          "dx fused with " + h +
              "gelu's backward: CPU twin of cuBLASLt's DGELU_BGRAD epilogue (fp32 dy W times "
              "gelu_tanh' of the stored pre-activation, rounded once; " +
              h + "c_fc's bias gradient summed from the unrounded values)");
    CHECK(kernels(h + "gelu")
              .find("; backward: fused into " + h +
                    "c_proj's dx (DGELU_BGRAD), then the linear's") != std::string::npos);
    CHECK(kernels(h + "c_fc") == "forward fused into " + h + "gelu");
  }
  CHECK(count_containing(*forced, "DGELU_BGRAD epilogue") == 4);
  CHECK(count_containing(*never, "DGELU") == 0);
  // Names, inputs and parameters are the graph's.
  REQUIRE(forced->layer_count() == never->layer_count());
  for (std::size_t i = 0; i < forced->layer_count(); ++i) {
    CHECK(forced->node_inputs(i) == never->node_inputs(i));
    CHECK(forced->layer_param_range(i) == never->layer_param_range(i));
  }
}

TEST_CASE("fused linear dgelu: a gelu read by an add, or by two nodes, keeps its own backward",
          "[model][fusion]") {
  const char* graph = R"(input(8)
a = linear(out=8)
g = gelu_tanh
b = linear(out=8)
h = gelu_tanh
c = linear(h, out=8)
d = linear(h, out=8)
s = add(c, d)
t = add(s, g)
fc = linear(out=3)
)";
  for (const DType precision : {DType::f32, DType::bf16}) {
    INFO(dtype_name(precision));
    auto m =
        Model::build(ModelSpec::parse(graph), {8}, 3, options(precision, true, LinearGelu::on, 4));
    // g is read by b and by the add t: two readers.
    CHECK(m->layer_kernels(node_named(*m, "a")) == "forward fused into g");
    CHECK(m->layer_kernels(node_named(*m, "g")).find("backward: gelu's, then the linear's") !=
          std::string::npos);
    CHECK(m->layer_kernels(node_named(*m, "b")) == "forward fused into h");
    CHECK(m->layer_kernels(node_named(*m, "h")).find("backward: gelu's, then the linear's") !=
          std::string::npos);
    CHECK(count_containing(*m, "DGELU") == 0);
  }
}

TEST_CASE("fused linear dgelu: gpt-nano's training steps stay near --fuse off",
          "[model][fusion][precision]") {
  const DType precision = GENERATE(DType::bf16, DType::f16);
  INFO(dtype_name(precision));
  const ModelSpec spec = ModelSpec::parse("gpt-nano");
  auto fused = Model::build(spec, {kContext}, kVocab, options(precision, true, LinearGelu::on));
  auto plain = Model::build(spec, {kContext}, kVocab, options(precision, true, LinearGelu::off));
  REQUIRE(count_containing(*fused, "DGELU_BGRAD epilogue") == 4);
  const float scale = precision == DType::f16 ? 1024.0f : 1.0f;
  const float lr = 0.05f;
  const std::vector<float> start(
      static_cast<const float*>(plain->params().ptr),
      static_cast<const float*>(plain->params().ptr) + plain->param_count());
  for (int step = 0; step < 4; ++step) {
    std::vector<float> ids;
    std::vector<std::int32_t> labels;
    hashed_tokens(90 + static_cast<std::uint64_t>(step), kBatch * kContext, kVocab, ids, labels);
    double loss[2];
    int k = 0;
    for (Model* m : {fused.get(), plain.get()}) {
      loss[k++] = m->forward(ids.data(), labels.data(), kBatch, true).loss_sum;
      m->backward(scale, false);
      // Plain SGD on the master weights, the same on both.
      float* p = static_cast<float*>(m->params().ptr);
      const float* g = static_cast<const float*>(m->grads().ptr);
      for (std::size_t i = 0; i < m->param_count(); ++i) p[i] -= lr / scale * g[i];
    }
    INFO("step " << step << ": loss sums " << loss[0] << " (fused) and " << loss[1]
                 << " (unfused)");
    REQUIRE(std::isfinite(loss[0]));
    CHECK(std::abs(loss[0] - loss[1]) <= 2e-3 * std::abs(loss[1]));
  }
  // What the 4 steps moved, per node's parameters: the fused plan's moves
  // within a few 16-bit steps of the unfused plan's.
  const auto moved = [&](Model& m) {
    std::vector<float> v(static_cast<const float*>(m.params().ptr),
                         static_cast<const float*>(m.params().ptr) + m.param_count());
    for (std::size_t i = 0; i < v.size(); ++i) v[i] -= start[i];
    return v;
  };
  const std::vector<float> a = moved(*fused), b = moved(*plain);
  for (std::size_t i = 0; i < fused->layer_count(); ++i) {
    const auto [lo, hi] = fused->layer_param_range(i);
    if (lo == hi) continue;
    const double d = relative_difference(a.data() + lo, b.data() + lo, hi - lo);
    INFO(fused->layer_name(i) << ": relative difference of the updates " << d);
    CHECK(d <= (precision == DType::bf16 ? 5e-2 : 1e-2));
  }
}

TEST_CASE("fused linear dgelu: --accum 2 near one batch of 2 x B; an empty micro-batch",
          "[model][fusion][precision]") {
  const DType precision = GENERATE(DType::f32, DType::bf16);
  INFO(dtype_name(precision));
  const ModelSpec spec = ModelSpec::parse("gpt-nano");
  auto m =
      Model::build(spec, {kContext}, kVocab, options(precision, true, LinearGelu::on, 2 * kBatch));
  REQUIRE(count_containing(*m, "DGELU_BGRAD epilogue") == 4);
  std::vector<float> ids;
  std::vector<std::int32_t> labels;
  hashed_tokens(95, 2 * kBatch * kContext, kVocab, ids, labels);
  const std::size_t half = kBatch * kContext;
  // Two micro-batches of B, accumulated: each backward's mean over its rows,
  // so their sum is twice the mean over 2B.
  m->forward(ids.data(), labels.data(), kBatch, true);
  m->backward(1.0f, false);
  m->forward(ids.data() + half, labels.data() + half, kBatch, true);
  m->backward(1.0f, true);
  std::vector<float> accumulated(static_cast<const float*>(m->grads().ptr),
                                 static_cast<const float*>(m->grads().ptr) + m->param_count());
  for (float& g : accumulated) g *= 0.5f;
  // A micro-batch of no samples, accumulated, leaves them as they are.
  const std::vector<std::uint32_t> before = bits_of(m->grads());
  m->forward(ids.data(), labels.data(), 0, true);
  m->backward(1.0f, true);
  CHECK(differing(bits_of(m->grads()), before) == 0);
  m->forward(ids.data(), labels.data(), 2 * kBatch, true);
  m->backward(1.0f, false);
  const auto* whole = static_cast<const float*>(m->grads().ptr);
  const double d = relative_difference(accumulated.data(), whole, m->param_count());
  INFO("relative gradient difference " << d);
  CHECK(d <= (precision == DType::f32 ? 1e-5 : 2e-2));
  // Every c_fc bias gradient accumulated (not overwritten by the second
  // micro-batch's epilogue, which would halve it).
  for (int b = 0; b < 4; ++b) {
    const std::string name = "h." + std::to_string(b) + ".mlp.c_fc";
    const std::size_t node = node_named(*m, name);
    const std::size_t end = m->layer_param_range(node).second;
    const std::size_t bias = end - m->layer_output_shape(node).back();  // weight, then bias
    INFO(name);
    CHECK(relative_difference(accumulated.data() + bias, whole + bias, end - bias) <=
          (precision == DType::f32 ? 1e-5 : 2e-2));
  }
  // A micro-batch of no samples that starts a step zeroes them.
  m->forward(ids.data(), labels.data(), 0, true);
  m->backward(1.0f, false);
  const std::vector<std::uint32_t> g = bits_of(m->grads());
  CHECK(std::count(g.begin(), g.end(), 0u) == static_cast<std::ptrdiff_t>(g.size()));
}
