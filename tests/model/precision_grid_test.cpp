// Under --precision bf16|fp16 the model rounds every activation and activation
// gradient to the 16-bit grid, and skips that pass where a layer says that what
// it wrote is on the grid already (KeepsPrecisionGrid: relu, max pooling, a
// convolution's y without a bias and its dx, BatchNorm's y and dx and a
// two-input add's y, which round as they write, the gradients of add and concat). Skipping
// is exact only if the claims hold: each claim is checked here on the CPU, with
// inputs on the grid, against a non-vacuous case (the same layer in fp32 writes
// values off it), and the layers that must not claim (a bias, average pooling,
// GELU, a scaled add's dx) do not.
#include <catch2/catch.hpp>

#include <memory>
#include <string>
#include <vector>

#include "kernels/precision.cuh"
#include "model/conv2d_layer.h"
#include "model/layer.h"
#include "model/stateless_layers.h"
#include "ringtrain/model/model_spec.h"
#include "ringtrain/ops/compute_context.h"
#include "ringtrain/ops/precision.h"
#include "tests/model/test_data.h"

using namespace ringtrain;

namespace {

std::vector<float> on_grid(std::uint64_t salt, std::size_t n, DType p) {
  std::vector<float> v = test::hashed_vector(salt, n);
  for (float& e : v) e = kernels::round_to_precision_grid(e, p);
  return v;
}

std::size_t off_grid(const std::vector<float>& v, DType p) {
  std::size_t n = 0;
  for (float e : v) n += kernels::round_to_precision_grid(e, p) != e;
  return n;
}

const KeepsPrecisionGrid& claims(const Layer& l) {
  const auto* k = dynamic_cast<const KeepsPrecisionGrid*>(&l);
  REQUIRE(k != nullptr);
  return *k;
}

// One forward and backward of `layer` (parameters, if any, bound to `params`)
// on grid inputs; y and dx.
struct Pass {
  std::vector<float> y, dx;
};
Pass run(Layer& layer, std::size_t batch, DType p) {
  const std::size_t in = batch * layer.input_shape().numel();
  const std::size_t out = batch * layer.output_shape().numel();
  const auto x = on_grid(11, in, p), dy = on_grid(12, out, p);
  Pass r{std::vector<float>(out), std::vector<float>(in)};
  layer.forward(x.data(), r.y.data(), batch, true);
  layer.backward(x.data(), r.y.data(), dy.data(), r.dx.data(), batch, false);
  return r;
}

// The last node of `graph` (the others only name its inputs), built for
// `inputs`, with its parameters (if any) bound on the grid and its buffers at
// their initial values.
struct Node {
  std::unique_ptr<Layer> layer;
  std::vector<float> params, grads, buffers;
};
Node node(const std::string& graph, const std::vector<Shape>& inputs, const ComputeContext& ctx,
          DType p) {
  static const DropoutContext dropout{};
  const ModelSpec spec = ModelSpec::parse(graph);
  Node n;
  n.layer = make_layer(spec.layers.back(), inputs, "l", 0, ctx, 2, dropout);
  std::size_t np = 0;
  for (const ParamDesc& d : n.layer->param_descs()) np += d.shape.numel();
  n.params = on_grid(21, np, p);
  n.grads.assign(np, 0.0f);
  n.layer->bind(n.params.data(), n.grads.data());
  for (const ParamDesc& d : n.layer->buffer_descs())
    n.buffers.insert(n.buffers.end(), d.shape.numel(), d.constant);
  if (!n.buffers.empty()) n.layer->bind_buffers(n.buffers.data());
  return n;
}
// forward_many and backward_many over `k` grid inputs of the layer's input shape.
Pass run_many(Layer& layer, std::size_t k, std::size_t batch, DType p) {
  const std::size_t in = batch * layer.input_shape().numel();
  const std::size_t out = batch * layer.output_shape().numel();
  std::vector<std::vector<float>> x, dx(k, std::vector<float>(in));
  std::vector<const float*> xs;
  std::vector<float*> dxs;
  for (std::size_t i = 0; i < k; ++i) x.push_back(on_grid(30 + i, in, p));
  for (std::size_t i = 0; i < k; ++i) {
    xs.push_back(x[i].data());
    dxs.push_back(dx[i].data());
  }
  const auto dy = on_grid(40, out, p);
  Pass r{std::vector<float>(out), {}};
  layer.forward_many(xs, r.y.data(), batch, true);
  layer.backward_many(xs, r.y.data(), dy.data(), dxs, batch, false);
  for (const auto& d : dx) r.dx.insert(r.dx.end(), d.begin(), d.end());
  return r;
}

}  // namespace

TEST_CASE("precision grid: BatchNorm's y and dx and a two-input add's y are rounded as written",
          "[model][precision]") {
  const Shape s{4, 5, 3};
  for (const DType p : {DType::bf16, DType::f16}) {
    INFO(precision_name(p));
    auto low = ComputeContext::create(Device::cpu(), Tf32Mode::pytorch_default, p);
    auto fp32 = ComputeContext::create(Device::cpu());
    for (const bool training : {true, false}) {
      Node bn = node("batch_norm", {s}, *low, p), ref = node("batch_norm", {s}, *fp32, p);
      CHECK(claims(*bn.layer).output_on_grid());
      CHECK(claims(*bn.layer).input_grad_on_grid());
      const auto x = on_grid(50, 2 * s.numel(), p);
      std::vector<float> y(x.size()), y_ref(x.size());
      bn.layer->forward(x.data(), y.data(), 2, training);
      ref.layer->forward(x.data(), y_ref.data(), 2, training);
      CHECK(off_grid(y_ref, p) > 0);
      CHECK(off_grid(y, p) == 0);
      // The same numbers as fp32 arithmetic rounded once.
      for (float& e : y_ref) e = kernels::round_to_precision_grid(e, p);
      CHECK(y == y_ref);
      // dx too: fp32's dx rounded once, on the grid where fp32's is not.
      const Pass b = run(*bn.layer, 2, p);
      Pass b_ref = run(*ref.layer, 2, p);
      CHECK(off_grid(b_ref.dx, p) > 0);
      CHECK(off_grid(b.dx, p) == 0);
      for (float& e : b_ref.dx) e = kernels::round_to_precision_grid(e, p);
      CHECK(b.dx == b_ref.dx);
    }

    const std::string two = "a = relu; b = relu; y = add(a, b)";
    Node add = node(two, {s, s}, *low, p), add_ref = node(two, {s, s}, *fp32, p);
    CHECK(claims(*add.layer).output_on_grid());
    CHECK(claims(*add.layer).input_grad_on_grid());
    const Pass a = run_many(*add.layer, 2, 2, p), a_ref = run_many(*add_ref.layer, 2, 2, p);
    CHECK(off_grid(a_ref.y, p) > 0);
    CHECK(off_grid(a.y, p) == 0);
    CHECK(off_grid(a.dx, p) == 0);
    std::vector<float> rounded = a_ref.y;
    for (float& e : rounded) e = kernels::round_to_precision_grid(e, p);
    CHECK(a.y == rounded);

    Node three = node("a = relu; b = relu; c = relu; y = add(a, b, c)", {s, s, s}, *low, p);
    CHECK_FALSE(claims(*three.layer).output_on_grid());
    Node scaled = node("a = relu; b = relu; y = add(a, b, scale=0.3)", {s, s}, *low, p);
    CHECK_FALSE(claims(*scaled.layer).input_grad_on_grid());
    CHECK(off_grid(run_many(*scaled.layer, 2, 2, p).dx, p) > 0);

    Node cat = node("a = relu; b = relu; y = concat(a, b)", {s, s}, *low, p);
    CHECK(claims(*cat.layer).output_on_grid());
    CHECK(claims(*cat.layer).input_grad_on_grid());
    const Pass c = run_many(*cat.layer, 2, 2, p);
    CHECK(off_grid(c.y, p) == 0);
    CHECK(off_grid(c.dx, p) == 0);
  }
}

TEST_CASE("precision grid: relu and max pooling keep it; GELU and average pooling do not",
          "[model][precision]") {
  for (const DType p : {DType::bf16, DType::f16}) {
    INFO(precision_name(p));
    auto ctx = ComputeContext::create(Device::cpu(), Tf32Mode::pytorch_default, p);
    ElementwiseActivationLayer relu("relu", Shape{3, 5, 4}, *ctx, kReluActivation);
    CHECK(claims(relu).output_on_grid());
    CHECK(claims(relu).input_grad_on_grid());
    const Pass r = run(relu, 2, p);
    CHECK(off_grid(r.y, p) == 0);
    CHECK(off_grid(r.dx, p) == 0);

    ElementwiseActivationLayer gelu("gelu", Shape{3, 5, 4}, *ctx, kGeluActivation);
    CHECK_FALSE(claims(gelu).output_on_grid());
    CHECK_FALSE(claims(gelu).input_grad_on_grid());
    CHECK(off_grid(run(gelu, 2, p).y, p) > 0);  // why GELU may not claim

    // 3x3 windows of stride 2 overlap: dx adds two dy where they do.
    Pool2dGeometry g{4, 9, 9, 3, 2, 1};
    auto max = std::make_unique<Pool2dLayer>("max", g, *ctx, 2);
    CHECK(claims(*max).output_on_grid());
    CHECK_FALSE(claims(*max).input_grad_on_grid());
    const Pass m = run(*max, 2, p);
    CHECK(off_grid(m.y, p) == 0);
    CHECK(off_grid(m.dx, p) > 0);
    g.mode = PoolMode::average;
    auto avg = std::make_unique<Pool2dLayer>("avg", g, *ctx, 2);
    CHECK_FALSE(claims(*avg).output_on_grid());
    CHECK(off_grid(run(*avg, 2, p).y, p) > 0);
  }
}

TEST_CASE("precision grid: a convolution's y without a bias and its dx keep it",
          "[model][precision][conv]") {
  const Conv2dGeometry g{3, 7, 6, 4, 3, 1, 1};
  const std::size_t wn = 4 * 3 * 3 * 3;
  for (const DType p : {DType::bf16, DType::f16}) {
    for (const bool bias : {false, true}) {
      INFO(precision_name(p) << (bias ? " with a bias" : " without a bias"));
      auto low = ComputeContext::create(Device::cpu(), Tf32Mode::pytorch_default, p);
      auto fp32 = ComputeContext::create(Device::cpu());
      Conv2dLayer conv("conv", g, *low, 2, bias), ref("conv", g, *fp32, 2, bias);
      CHECK(claims(conv).output_on_grid() == !bias);
      CHECK(claims(conv).input_grad_on_grid());
      const std::size_t np = wn + (bias ? 4 : 0);
      std::vector<float> params = on_grid(13, np, p), grads(np), grads_ref(np);
      conv.bind(params.data(), grads.data());
      ref.bind(params.data(), grads_ref.data());
      const Pass c = run(conv, 2, p), r = run(ref, 2, p);
      CHECK(off_grid(r.y, p) > 0);  // fp32 arithmetic leaves the grid
      CHECK(off_grid(r.dx, p) > 0);
      CHECK(off_grid(c.dx, p) == 0);
      if (bias)
        CHECK(off_grid(c.y, p) > 0);  // y + b: the model rounds it
      else
        CHECK(off_grid(c.y, p) == 0);
    }
  }
}
