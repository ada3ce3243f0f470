// SGD steps against updates computed by hand, then against an independent
// double-precision reference over many sizes.
#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include "ringtrain/optim/optimizer.h"
#include "tests/optim/optim_test_data.h"

using namespace ringtrain;

namespace {

OptimizerConfig sgd_config(float momentum, bool nesterov, float weight_decay) {
  OptimizerConfig c;
  c.kind = "sgd";
  c.momentum = momentum;
  c.nesterov = nesterov;
  c.weight_decay = weight_decay;
  return c;
}

// Runs the steps on a one-element buffer and returns p after each step.
std::vector<float> run_scalar(const OptimizerConfig& config, float p0,
                              const std::vector<float>& grads, float lr) {
  auto opt = make_optimizer(config, 1, Device::cpu());
  float p = p0;
  std::vector<float> trace;
  for (float g : grads) {
    opt->step(view_of(&p, 1), view_of(&g, 1), lr);
    trace.push_back(p);
  }
  return trace;
}

}  // namespace

TEST_CASE("sgd plain: p -= lr * g", "[optim][sgd]") {
  auto opt = make_optimizer(sgd_config(0.f, false, 0.f), 2, Device::cpu());
  CHECK(opt->state().empty());
  std::vector<float> p = {1.0f, -2.0f};
  std::vector<float> g = {0.5f, 0.25f};
  opt->step(view_of(p.data(), 2), view_of(g.data(), 2), 0.1f);
  CHECK(p[0] == Approx(0.95).epsilon(1e-6));
  CHECK(p[1] == Approx(-2.025).epsilon(1e-6));
  g = {-1.0f, 2.0f};
  opt->step(view_of(p.data(), 2), view_of(g.data(), 2), 0.1f);
  CHECK(p[0] == Approx(1.05).epsilon(1e-6));
  CHECK(p[1] == Approx(-2.225).epsilon(1e-6));
  CHECK(opt->step_count() == 2);
}

TEST_CASE("sgd momentum 0.9: buf = 0.9 buf + g, p -= lr buf", "[optim][sgd]") {
  // buf: 0.5, -0.55, -0.245; p: 1 - 0.05, + 0.055, + 0.0245
  const auto trace = run_scalar(sgd_config(0.9f, false, 0.f), 1.0f, {0.5f, -1.0f, 0.25f}, 0.1f);
  CHECK(trace[0] == Approx(0.95).epsilon(1e-6));
  CHECK(trace[1] == Approx(1.005).epsilon(1e-6));
  CHECK(trace[2] == Approx(1.0295).epsilon(1e-6));
}

TEST_CASE("sgd nesterov 0.9: p -= lr (g + 0.9 buf)", "[optim][sgd]") {
  // buf as above; updates 0.5 + 0.45 = 0.95, -1 - 0.495 = -1.495, 0.25 - 0.2205 = 0.0295
  const auto trace = run_scalar(sgd_config(0.9f, true, 0.f), 1.0f, {0.5f, -1.0f, 0.25f}, 0.1f);
  CHECK(trace[0] == Approx(0.905).epsilon(1e-6));
  CHECK(trace[1] == Approx(1.0545).epsilon(1e-6));
  CHECK(trace[2] == Approx(1.05155).epsilon(1e-6));
}

TEST_CASE("sgd weight decay is an L2 term added to the gradient", "[optim][sgd]") {
  SECTION("without momentum") {
    // d = 0.5 + 0.01 * 2 = 0.52 -> 1.948; d = 0.5 + 0.01948 -> 1.896052
    const auto trace = run_scalar(sgd_config(0.f, false, 0.01f), 2.0f, {0.5f, 0.5f}, 0.1f);
    CHECK(trace[0] == Approx(1.948).epsilon(1e-6));
    CHECK(trace[1] == Approx(1.896052).epsilon(1e-6));
  }
  SECTION("with momentum 0.9") {
    // buf = 0.52 -> 1.948; buf = 0.468 + 0.51948 = 0.98748 -> 1.849252
    const auto trace = run_scalar(sgd_config(0.9f, false, 0.01f), 2.0f, {0.5f, 0.5f}, 0.1f);
    CHECK(trace[0] == Approx(1.948).epsilon(1e-6));
    CHECK(trace[1] == Approx(1.849252).epsilon(1e-6));
  }
}

TEST_CASE("sgd matches a double reference over sizes and variants", "[optim][sgd]") {
  struct Variant {
    float momentum;
    bool nesterov;
    float weight_decay;
  };
  const Variant variants[] = {{0.f, false, 0.f},    {0.f, false, 1e-2f}, {0.9f, false, 0.f},
                              {0.9f, false, 5e-4f}, {0.8f, true, 0.f},   {0.95f, true, 1e-3f}};
  const float lrs[] = {0.05f, 0.1f, 0.02f, 0.07f};
  for (const Variant& var : variants) {
    for (std::size_t n : test::kTestSizes) {
      CAPTURE(var.momentum, var.nesterov, var.weight_decay, n);
      auto opt = make_optimizer(sgd_config(var.momentum, var.nesterov, var.weight_decay), n,
                                Device::cpu());
      std::vector<float> p = test::test_vector(1, n, 2.f);
      std::vector<double> ref_p(p.begin(), p.end()), ref_buf(n, 0.0);
      for (std::size_t s = 0; s < 4; ++s) {
        std::vector<float> g = test::test_vector(100 + s, n);
        opt->step(view_of(p.data(), n), view_of(g.data(), n), lrs[s]);
        for (std::size_t i = 0; i < n; ++i) {
          const double d = g[i] + static_cast<double>(var.weight_decay) * ref_p[i];
          double update = d;
          if (var.momentum > 0.f) {
            ref_buf[i] = var.momentum * ref_buf[i] + d;
            update = var.nesterov ? d + var.momentum * ref_buf[i] : ref_buf[i];
          }
          ref_p[i] -= lrs[s] * update;
        }
      }
      std::size_t wrong = 0;
      for (std::size_t i = 0; i < n; ++i)
        wrong += std::abs(p[i] - ref_p[i]) > 1e-5 * (1 + std::abs(ref_p[i]));
      if (var.momentum > 0.f) {
        const auto state = opt->state();
        REQUIRE(state.size() == 1);
        CHECK(state[0].name == "momentum");
        CHECK(state[0].view.count == n);
        const float* buf = state[0].view.as<float>();
        for (std::size_t i = 0; i < n; ++i)
          wrong += std::abs(buf[i] - ref_buf[i]) > 1e-5 * (1 + std::abs(ref_buf[i]));
      }
      CHECK(wrong == 0);
      CHECK(opt->step_count() == 4);
    }
  }
}

TEST_CASE("sgd with lr 0 leaves params unchanged", "[optim][sgd]") {
  const std::size_t n = 33;
  auto opt = make_optimizer(sgd_config(0.9f, true, 0.1f), n, Device::cpu());
  std::vector<float> p = test::test_vector(5, n);
  const std::vector<float> before = p;
  std::vector<float> g = test::test_vector(6, n);
  opt->step(view_of(p.data(), n), view_of(g.data(), n), 0.f);
  CHECK(p == before);
}
