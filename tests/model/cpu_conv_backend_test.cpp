// The CPU convolution backends agree: oneDNN's primitives (the default where
// the build has them) against ringtrain's own im2col + GEMM, forward, the
// weight gradient (overwritten and accumulated) and the input gradient, over
// geometries that exercise strides, padding, rectangular kernels, 1x1
// convolutions and a last window that leaves input unused; and, under a
// bf16/fp16 context, the 16-bit output (before the bias) and input gradient
// that the GPU's cuDNN writes.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include "kernels/precision.cuh"
#include "ops/cpu_conv_plan.h"
#include "ringtrain/config.h"
#include "ringtrain/ops/compute_context.h"
#include "ringtrain/ops/conv2d.h"
#include "ringtrain/ops/precision.h"
#include "tests/model/test_data.h"

using namespace ringtrain;

namespace {

struct Result {
  std::vector<float> y, dw, dw_accumulated, dx;
};

Result run(const char* backend, const Conv2dGeometry& g, std::size_t batch) {
  setenv("RINGTRAIN_CPU_CONV", backend, 1);
  auto ctx = ComputeContext::create(Device::cpu());
  Conv2dOp op(*ctx, g, batch + 2);  // planned for more than it runs
  const std::size_t in = batch * g.in_channels * g.height * g.width;
  const std::size_t out = batch * g.out_channels * g.out_height() * g.out_width();
  const std::size_t wn = g.out_channels * g.in_channels * g.kh() * g.kw();
  const auto x = test::hashed_vector(1, in), w = test::hashed_vector(2, wn),
             dy = test::hashed_vector(3, out);
  Result r;
  r.y.assign(out, 0.0f);
  r.dw.assign(wn, 0.0f);
  r.dx.assign(in, 0.0f);
  op.forward(x.data(), w.data(), nullptr, r.y.data(), batch);
  op.backward(x.data(), w.data(), dy.data(), r.dx.data(), r.dw.data(), nullptr, batch, false);
  r.dw_accumulated = test::hashed_vector(4, wn);
  op.backward(x.data(), w.data(), dy.data(), nullptr, r.dw_accumulated.data(), nullptr, batch,
              true);
  unsetenv("RINGTRAIN_CPU_CONV");
  return r;
}

void check_close(const std::vector<float>& a, const std::vector<float>& b, const char* what) {
  REQUIRE(a.size() == b.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    INFO(what << "[" << i << "]: " << a[i] << " vs " << b[i]);
    REQUIRE(std::abs(a[i] - b[i]) <= 1e-4f + 1e-4f * std::abs(b[i]));
  }
}

}  // namespace

#if !RINGTRAIN_ONEDNN
// Built without oneDNN (-DRINGTRAIN_ONEDNN=OFF): im2col is the only path, and
// the comparison below does not exist, rather than passing with a warning.
TEST_CASE("cpu convolutions: a build without oneDNN uses im2col", "[ops][conv]") {
  CHECK(std::string(detail::cpu_conv_backend_name()) == "im2col");
}
#else
TEST_CASE("cpu convolutions: oneDNN equals im2col", "[ops][conv]") {
  // A build with oneDNN that does not use it has lost its fast path.
  REQUIRE(std::string(detail::cpu_conv_backend_name()) == "onednn");
  std::vector<Conv2dGeometry> cases;
  cases.push_back({3, 9, 9, 5, 3, 1, 1});    // 3x3, same padding
  cases.push_back({4, 10, 9, 6, 3, 2, 1});   // stride 2, odd width
  cases.push_back({2, 8, 8, 3, 1, 1, 0});    // 1x1: im2col skips the columns
  cases.push_back({3, 11, 11, 4, 5, 2, 0});  // the last window leaves a row and column unused
  Conv2dGeometry rect{4, 7, 9, 3, 1, 1, 0};
  rect.kernel_w = 7;  // Inception's 1x7
  rect.padding_w = 3;
  cases.push_back(rect);
  for (const Conv2dGeometry& g : cases) {
    INFO("conv " << g.in_channels << "x" << g.height << "x" << g.width << " -> " << g.out_channels
                 << ", kernel " << g.kh() << "x" << g.kw() << ", stride " << g.sh() << ", padding "
                 << g.ph() << "x" << g.pw());
    for (const std::size_t batch : {std::size_t{1}, std::size_t{3}}) {
      const Result ref = run("im2col", g, batch);
      const Result lib = run("onednn", g, batch);
      check_close(lib.y, ref.y, "y");
      check_close(lib.dw, ref.dw, "dw");
      check_close(lib.dw_accumulated, ref.dw_accumulated, "dw accumulated");
      check_close(lib.dx, ref.dx, "dx");
    }
  }
}
#endif

TEST_CASE("cpu convolutions: a bad RINGTRAIN_CPU_CONV is named", "[ops][conv]") {
  setenv("RINGTRAIN_CPU_CONV", "fast", 1);
  auto ctx = ComputeContext::create(Device::cpu());
  CHECK_THROWS_WITH(Conv2dOp(*ctx, Conv2dGeometry{1, 4, 4, 1, 3, 1, 1}, 2),
                    Catch::Contains("RINGTRAIN_CPU_CONV=fast"));
  unsetenv("RINGTRAIN_CPU_CONV");
}

// The GPU's 16-bit convolutions (cuDNN on bf16/fp16 tensors) write a 16-bit y
// and dx; the conv layer adds its bias to that y and the model rounds the sum.
// The CPU rounds at the same points, so that a biased conv gives the GPU's
// numbers (one rounding before the bias, one after: a single rounding of
// conv + b differs by one step of the grid on a good part of the elements) and
// a gradient summed from two consumers sums the same 16-bit terms. dw stays fp32.
TEST_CASE("cpu convolutions under bf16/fp16: y before the bias and dx on the grid, dw fp32",
          "[ops][conv][precision]") {
  const Conv2dGeometry g{3, 9, 8, 5, 3, 1, 1};
  const std::size_t batch = 3;
  const std::size_t in = batch * g.in_channels * g.height * g.width;
  const std::size_t hw = g.out_height() * g.out_width();
  const std::size_t out = batch * g.out_channels * hw;
  const std::size_t wn = g.out_channels * g.in_channels * g.kh() * g.kw();
  for (const char* backend : {"im2col", "onednn"}) {
    if (std::string(backend) == "onednn") {
      setenv("RINGTRAIN_CPU_CONV", "onednn", 1);
      const bool have = std::string(detail::cpu_conv_backend_name()) == "onednn";
      unsetenv("RINGTRAIN_CPU_CONV");
      if (!have) continue;
    }
    for (const DType p : {DType::bf16, DType::f16}) {
      INFO(backend << " " << precision_name(p));
      const DType kind = p;
      std::vector<float> x = test::hashed_vector(5, in), w = test::hashed_vector(6, wn),
                         dy = test::hashed_vector(7, out), b = test::hashed_vector(8, 5);
      for (auto* v : {&x, &w, &dy, &b})
        for (float& e : *v) e = kernels::round_to_precision_grid(e, kind);
      setenv("RINGTRAIN_CPU_CONV", backend, 1);
      auto fp32 = ComputeContext::create(Device::cpu());
      auto low = ComputeContext::create(Device::cpu(), Tf32Mode::pytorch_default, p);
      Conv2dOp ref(*fp32, g, batch), op(*low, g, batch);
      unsetenv("RINGTRAIN_CPU_CONV");
      std::vector<float> y_ref(out), dx_ref(in), dw_ref(wn), y(out), dx(in), dw(wn);
      ref.forward(x.data(), w.data(), nullptr, y_ref.data(), batch);
      ref.backward(x.data(), w.data(), dy.data(), dx_ref.data(), dw_ref.data(), nullptr, batch,
                   false);
      op.forward(x.data(), w.data(), b.data(), y.data(), batch);
      op.backward(x.data(), w.data(), dy.data(), dx.data(), dw.data(), nullptr, batch, false);
      std::size_t wrong_y = 0, off_grid_y = 0, wrong_dx = 0;
      for (std::size_t i = 0; i < out; ++i) {
        const float conv16 = kernels::round_to_precision_grid(y_ref[i], kind);
        wrong_y += y[i] != conv16 + b[(i / hw) % g.out_channels];
        off_grid_y += kernels::round_to_precision_grid(y_ref[i], kind) != y_ref[i];
      }
      for (std::size_t i = 0; i < in; ++i)
        wrong_dx += dx[i] != kernels::round_to_precision_grid(dx_ref[i], kind);
      CHECK(off_grid_y > 0);  // the rounding is not vacuous
      CHECK(wrong_y == 0);
      CHECK(wrong_dx == 0);
      CHECK(dw == dw_ref);
    }
  }
}
