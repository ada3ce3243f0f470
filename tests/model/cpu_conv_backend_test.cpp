// The CPU convolution backends agree: oneDNN's primitives (the default where
// the build has them) against ringtrain's own im2col + GEMM, forward, the
// weight gradient (overwritten and accumulated) and the input gradient, over
// geometries that exercise strides, padding, rectangular kernels, 1x1
// convolutions and a last window that leaves input unused.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include "ops/cpu_conv_plan.h"
#include "ringtrain/ops/compute_context.h"
#include "ringtrain/ops/conv2d.h"
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

TEST_CASE("cpu convolutions: oneDNN equals im2col", "[ops][conv]") {
  if (std::string(detail::cpu_conv_backend_name()) != "onednn") {
    WARN("this build has no oneDNN: nothing to compare");
    return;
  }
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

TEST_CASE("cpu convolutions: a bad RINGTRAIN_CPU_CONV is named", "[ops][conv]") {
  setenv("RINGTRAIN_CPU_CONV", "fast", 1);
  auto ctx = ComputeContext::create(Device::cpu());
  CHECK_THROWS_WITH(Conv2dOp(*ctx, Conv2dGeometry{1, 4, 4, 1, 3, 1, 1}, 2),
                    Catch::Contains("RINGTRAIN_CPU_CONV=fast"));
  unsetenv("RINGTRAIN_CPU_CONV");
}
