// Global-norm clipping above and below the threshold, the norm against a double
// reference, scaling, and the non-finite and bad-input cases.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "kernels/grad_clip.cuh"
#include "ringtrain/core/error.h"
#include "ringtrain/optim/grad_clip.h"
#include "tests/optim/optim_test_data.h"

using namespace ringtrain;
using Catch::Matchers::Contains;

TEST_CASE("global norm of a 3-4 vector is 5", "[optim][clip]") {
  std::vector<float> g = {3.f, 4.f};
  CHECK(global_grad_norm(view_of(g.data(), 2)) == 5.0);
  std::vector<float> empty;
  CHECK(global_grad_norm(view_of(empty.data(), 0)) == 0.0);
}

TEST_CASE("global norm matches a double reference and is reproducible", "[optim][clip]") {
  for (std::size_t n : test::kTestSizes) {
    CAPTURE(n);
    std::vector<float> g = test::test_vector(31, n, 10.f);
    double ref = 0;
    for (float x : g) ref += double{x} * x;
    ref = std::sqrt(ref);
    const double norm = global_grad_norm(view_of(g.data(), n));
    CHECK(norm == Approx(ref).epsilon(1e-12));
    CHECK(global_grad_norm(view_of(g.data(), n)) == norm);  // bit for bit
  }
}

TEST_CASE("clip below the threshold leaves gradients untouched", "[optim][clip]") {
  std::vector<float> g = {3.f, -4.f, 0.f};
  const std::vector<float> before = g;
  CHECK(clip_grad_norm(view_of(g.data(), 3), 10.0) == 5.0);
  CHECK(g == before);
  CHECK(clip_grad_norm(view_of(g.data(), 3), 5.0) == 5.0);  // equal: not above
  CHECK(g == before);
}

TEST_CASE("clip above the threshold scales to max_norm", "[optim][clip]") {
  std::vector<float> g = {3.f, -4.f};
  CHECK(clip_grad_norm(view_of(g.data(), 2), 1.0) == 5.0);  // returns the norm before
  CHECK(g[0] == Approx(0.6).epsilon(1e-6));
  CHECK(g[1] == Approx(-0.8).epsilon(1e-6));
  CHECK(global_grad_norm(view_of(g.data(), 2)) == Approx(1.0).epsilon(1e-6));

  const std::size_t n = 100003;
  std::vector<float> big = test::test_vector(41, n, 3.f);
  const std::vector<float> before = big;
  const double norm = clip_grad_norm(view_of(big.data(), n), 2.5);
  CHECK(norm > 2.5);
  const double factor = 2.5 / (norm + 1e-6);
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < n; ++i)
    wrong += big[i] != static_cast<float>(before[i] * static_cast<float>(factor));
  CHECK(wrong == 0);
  CHECK(global_grad_norm(view_of(big.data(), n)) == Approx(2.5).epsilon(1e-6));
}

TEST_CASE("a non-finite norm is returned and the gradients are left alone", "[optim][clip]") {
  std::vector<float> g = {1.f, std::numeric_limits<float>::infinity(), 2.f};
  const std::vector<float> before = g;
  CHECK(std::isinf(clip_grad_norm(view_of(g.data(), 3), 1.0)));
  CHECK(std::memcmp(g.data(), before.data(), 3 * sizeof(float)) == 0);
  g[1] = std::numeric_limits<float>::quiet_NaN();
  CHECK(std::isnan(clip_grad_norm(view_of(g.data(), 3), 1.0)));
  CHECK(g[0] == 1.f);
  CHECK(g[2] == 2.f);
}

TEST_CASE("scale_buffer multiplies in place", "[optim][clip]") {
  for (std::size_t n : test::kTestSizes) {
    std::vector<float> x = test::test_vector(51, n);
    const std::vector<float> before = x;
    scale_buffer(view_of(x.data(), n), 0.25f);
    std::size_t wrong = 0;
    for (std::size_t i = 0; i < n; ++i) wrong += x[i] != before[i] * 0.25f;
    CHECK(wrong == 0);
  }
}

TEST_CASE("bad clip and scale inputs are errors", "[optim][clip]") {
  std::vector<float> g = {1.f, 2.f};
  CHECK_THROWS_WITH(clip_grad_norm(view_of(g.data(), 2), 0.0), Contains("--clip-grad-norm"));
  CHECK_THROWS_WITH(clip_grad_norm(view_of(g.data(), 2), -1.0), Contains("-1"));
  std::vector<double> d = {1.0};
  CHECK_THROWS_WITH(global_grad_norm(view_of(d.data(), 1)), Contains("f64"));
  CHECK_THROWS_WITH(scale_buffer(view_of(d.data(), 1), 2.f), Contains("f64"));
  CHECK_THROWS_WITH(scale_buffer(view_of(g.data(), 2), INFINITY), Contains("finite"));
}

TEST_CASE("the step's clipper gives clip_grad_norm's gradients and norm, bit for bit",
          "[optim][clip]") {
  GradClipper clipper(Device::cpu());
  for (std::size_t n : test::kTestSizes) {
    for (double max_norm : {0.5, 1e9}) {
      CAPTURE(n, max_norm);
      std::vector<float> a = test::test_vector(37, n, 3.f);
      std::vector<float> b = a;
      const double norm = clip_grad_norm(view_of(a.data(), n), max_norm);
      clipper.sum_squares(view_of(b.data(), n), nullptr);
      clipper.clip(view_of(b.data(), n), max_norm, nullptr);
      CHECK(clipper.norm() == norm);
      CHECK(std::memcmp(a.data(), b.data(), n * sizeof(float)) == 0);
      CHECK(clipper.finite_probe(nullptr).as<float>()[0] == 0.f);
    }
  }
}

TEST_CASE("the clip factor of a non-finite norm is 1 and its probe is NaN", "[optim][clip]") {
  CHECK(kernels::clip_factor(std::numeric_limits<double>::quiet_NaN(), 1.0) == 1.f);
  CHECK(kernels::clip_factor(std::numeric_limits<double>::infinity(), 1.0) == 1.f);
  CHECK(kernels::clip_factor(0.5, 1.0) == 1.f);
  CHECK(kernels::clip_factor(4.0, 1.0) == static_cast<float>(1.0 / (4.0 + 1e-6)));
  CHECK(kernels::clip_factor_of_sum(16.0, 1.0) == kernels::clip_factor(4.0, 1.0));
  GradClipper clipper(Device::cpu());
  std::vector<float> g = {1.f, std::numeric_limits<float>::infinity(), 2.f};
  const std::vector<float> before = g;
  clipper.sum_squares(view_of(g.data(), 3), nullptr);
  CHECK(std::isnan(clipper.finite_probe(nullptr).as<float>()[0]));
  clipper.clip(view_of(g.data(), 3), 1.0, nullptr);
  CHECK(std::memcmp(g.data(), before.data(), sizeof(float) * 3) == 0);  // left for the guard
  CHECK(clipper.sum_view().count == 1);
  CHECK(clipper.sum_view().dtype == DType::f64);
}
