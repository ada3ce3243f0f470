// Under --precision bf16|fp16 the model rounds every activation and activation
// gradient to the 16-bit grid, and skips that pass where a layer says that what
// it wrote is on the grid already (KeepsPrecisionGrid: relu, max pooling, a
// convolution's y without a bias and its dx). Skipping is exact only if the
// claims hold: each claim is checked here on the CPU, with inputs on the grid,
// against a non-vacuous case (the same layer in fp32 writes values off it), and
// the layers that must not claim (a bias, average pooling, GELU) do not.
#include <catch2/catch.hpp>

#include <memory>
#include <string>
#include <vector>

#include "kernels/precision.cuh"
#include "model/conv2d_layer.h"
#include "model/stateless_layers.h"
#include "ringtrain/ops/compute_context.h"
#include "ringtrain/ops/precision.h"
#include "tests/model/test_data.h"

using namespace ringtrain;

namespace {

std::vector<float> on_grid(std::uint64_t salt, std::size_t n, Precision p) {
  std::vector<float> v = test::hashed_vector(salt, n);
  for (float& e : v) e = kernels::round_to_precision_grid(e, static_cast<int>(p));
  return v;
}

std::size_t off_grid(const std::vector<float>& v, Precision p) {
  std::size_t n = 0;
  for (float e : v) n += kernels::round_to_precision_grid(e, static_cast<int>(p)) != e;
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
Pass run(Layer& layer, std::size_t batch, Precision p) {
  const std::size_t in = batch * layer.input_shape().numel();
  const std::size_t out = batch * layer.output_shape().numel();
  const auto x = on_grid(11, in, p), dy = on_grid(12, out, p);
  Pass r{std::vector<float>(out), std::vector<float>(in)};
  layer.forward(x.data(), r.y.data(), batch, true);
  layer.backward(x.data(), r.y.data(), dy.data(), r.dx.data(), batch, false);
  return r;
}

}  // namespace

TEST_CASE("precision grid: relu and max pooling keep it; GELU and average pooling do not",
          "[model][precision]") {
  for (const Precision p : {Precision::bf16, Precision::fp16}) {
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
  for (const Precision p : {Precision::bf16, Precision::fp16}) {
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
