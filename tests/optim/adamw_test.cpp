// AdamW steps against updates computed by hand (bias correction included), then
// against an independent double-precision reference over many sizes.
#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include "ringtrain/optim/optimizer.h"
#include "tests/optim/optim_test_data.h"

using namespace ringtrain;

namespace {

OptimizerConfig adamw_config(float weight_decay, float beta1 = 0.9f, float beta2 = 0.999f,
                             float eps = 1e-8f) {
  OptimizerConfig c;
  c.kind = "adamw";
  c.weight_decay = weight_decay;
  c.beta1 = beta1;
  c.beta2 = beta2;
  c.eps = eps;
  return c;
}

}  // namespace

TEST_CASE("adamw hand-computed steps with bias correction", "[optim][adamw]") {
  // lr 0.01, wd 0.1, betas (0.9, 0.999), p = 1.
  // step 1, g = 0.5: p = 0.999 (decay); m = 0.05, v = 0.00025; m_hat = 0.5, v_hat = 0.25,
  //   p -= 0.01 * 0.5 / (0.5 + 1e-8)                              -> 0.989
  // step 2, g = -0.25: p = 0.989 * 0.999; m = 0.02, v = 0.00031225;
  //   p -= 0.01 / 0.19 * 0.02 / (sqrt(0.00031225 / 0.001999) + 1e-8) -> 0.98534763
  // step 3, g = 0.125: m = 0.0305, v = 0.00032756275            -> 0.98095799
  auto opt = make_optimizer(adamw_config(0.1f), 1, Device::cpu());
  float p = 1.0f;
  const float grads[] = {0.5f, -0.25f, 0.125f};
  const double expect_p[] = {0.9890000002, 0.9853476298705847, 0.9809579908615949};
  const double expect_m[] = {0.05, 0.02, 0.0305};
  const double expect_v[] = {0.00025, 0.00031225, 0.00032756275};
  for (int s = 0; s < 3; ++s) {
    float g = grads[s];
    opt->step(view_of(&p, 1), view_of(&g, 1), 0.01f);
    const auto state = opt->state();
    REQUIRE(state.size() == 2);
    CHECK(state[0].name == "exp_avg");
    CHECK(state[1].name == "exp_avg_sq");
    CHECK(p == Approx(expect_p[s]).epsilon(1e-6));
    CHECK(state[0].view.as<float>()[0] == Approx(expect_m[s]).epsilon(1e-5));
    // 1 - 0.999f is 0.00099998713, not 0.001: the config holds betas as float.
    CHECK(state[1].view.as<float>()[0] == Approx(expect_v[s]).epsilon(2e-5));
  }
  CHECK(opt->step_count() == 3);
}

TEST_CASE("adamw first step moves each parameter by about lr against its gradient sign",
          "[optim][adamw]") {
  // With bias correction, m_hat = g and v_hat = g^2 at step 1: the update is lr * g / |g|.
  const std::size_t n = 101;
  auto opt = make_optimizer(adamw_config(0.f), n, Device::cpu());
  std::vector<float> p = test::test_vector(3, n);
  const std::vector<float> before = p;
  std::vector<float> g = test::test_vector(4, n);
  opt->step(view_of(p.data(), n), view_of(g.data(), n), 1e-3f);
  for (std::size_t i = 0; i < n; ++i) {
    const double expect = before[i] - 1e-3 * (g[i] > 0 ? 1.0 : -1.0);
    CHECK(p[i] == Approx(expect).margin(1e-6));
  }
}

TEST_CASE("adamw bias correction follows the restored step count", "[optim][adamw]") {
  // At t = 1001 the bias corrections are ~1: the step is lr * m / (sqrt(v) + eps)
  // with m = 0.1 g, v = 0.001 g^2 from zero state: lr * 0.1 / sqrt(0.001) * sign(g).
  auto opt = make_optimizer(adamw_config(0.f), 1, Device::cpu());
  opt->set_step_count(1000);
  float p = 0.f;
  float g = 2.f;
  opt->step(view_of(&p, 1), view_of(&g, 1), 0.01f);
  const double b1 = 1 - std::pow(0.9, 1001), b2 = 1 - std::pow(0.999, 1001);
  const double expect = -0.01 / b1 * 0.2 / (std::sqrt(0.004) / std::sqrt(b2) + 1e-8);
  CHECK(p == Approx(expect).epsilon(1e-5));
  CHECK(opt->step_count() == 1001);
}

TEST_CASE("adamw matches a double reference over sizes and configs", "[optim][adamw]") {
  struct Variant {
    float weight_decay, beta1, beta2, eps;
  };
  const Variant variants[] = {{0.f, 0.9f, 0.999f, 1e-8f},
                              {0.01f, 0.9f, 0.999f, 1e-8f},
                              {0.1f, 0.8f, 0.95f, 1e-6f},
                              {0.05f, 0.f, 0.99f, 1e-3f}};
  const float lrs[] = {1e-3f, 2e-3f, 5e-4f, 1e-3f, 3e-3f};
  for (const Variant& var : variants) {
    for (std::size_t n : test::kTestSizes) {
      CAPTURE(var.weight_decay, var.beta1, var.beta2, var.eps, n);
      auto opt = make_optimizer(adamw_config(var.weight_decay, var.beta1, var.beta2, var.eps), n,
                                Device::cpu());
      std::vector<float> p = test::test_vector(7, n, 3.f);
      std::vector<double> rp(p.begin(), p.end()), rm(n, 0.0), rv(n, 0.0);
      for (std::size_t s = 0; s < 5; ++s) {
        std::vector<float> g = test::test_vector(200 + s, n);
        opt->step(view_of(p.data(), n), view_of(g.data(), n), lrs[s]);
        const double t = static_cast<double>(s + 1);
        const double c1 = 1 - std::pow(double{var.beta1}, t);
        const double c2 = 1 - std::pow(double{var.beta2}, t);
        for (std::size_t i = 0; i < n; ++i) {
          rp[i] *= 1 - double{lrs[s]} * var.weight_decay;
          rm[i] = var.beta1 * rm[i] + (1 - double{var.beta1}) * g[i];
          rv[i] = var.beta2 * rv[i] + (1 - double{var.beta2}) * double{g[i]} * g[i];
          rp[i] -= lrs[s] / c1 * rm[i] / (std::sqrt(rv[i] / c2) + var.eps);
        }
      }
      const auto state = opt->state();
      REQUIRE(state.size() == 2);
      const float* m = state[0].view.as<float>();
      const float* v = state[1].view.as<float>();
      std::size_t wrong = 0;
      for (std::size_t i = 0; i < n; ++i) {
        const bool bad_p = std::abs(p[i] - rp[i]) > 1e-5 * (1 + std::abs(rp[i]));
        // m cancels (terms ~0.1, sums ~1e-4): its error is float ulps of the terms.
        const bool bad_m = std::abs(m[i] - rm[i]) > 1e-7 + 1e-5 * std::abs(rm[i]);
        const bool bad_v = std::abs(v[i] - rv[i]) > 1e-5 * (1e-6 + std::abs(rv[i]));
        wrong += bad_p + bad_m + bad_v;
      }
      CHECK(wrong == 0);
    }
  }
}
