// Bad optimizer configs and bad step arguments give errors that name the flag
// or the value.
#include <catch2/catch.hpp>

#include <vector>

#include "ringtrain/core/error.h"
#include "ringtrain/launch/gpu_runtime.h"
#include "ringtrain/optim/optimizer.h"

using namespace ringtrain;
using Catch::Matchers::Contains;

TEST_CASE("default configs are valid", "[optim][config]") {
  OptimizerConfig sgd;
  CHECK_NOTHROW(validate(sgd));
  OptimizerConfig adamw;
  adamw.kind = "adamw";
  CHECK_NOTHROW(validate(adamw));
}

TEST_CASE("bad optimizer configs name the flag and the value", "[optim][config]") {
  OptimizerConfig c;
  SECTION("unknown kind") {
    c.kind = "adam";
    CHECK_THROWS_WITH(validate(c), Contains("'adam'") && Contains("--optimizer"));
    CHECK_THROWS_AS(make_optimizer(c, 4, Device::cpu()), Error);
  }
  SECTION("momentum 1") {
    c.momentum = 1.f;
    CHECK_THROWS_WITH(validate(c), Contains("--momentum") && Contains("1"));
  }
  SECTION("negative momentum") {
    c.momentum = -0.1f;
    CHECK_THROWS_WITH(validate(c), Contains("--momentum") && Contains("-0.1"));
  }
  SECTION("nesterov without momentum") {
    c.momentum = 0.f;
    c.nesterov = true;
    CHECK_THROWS_WITH(validate(c), Contains("--nesterov"));
  }
  SECTION("negative weight decay") {
    c.weight_decay = -1e-4f;
    CHECK_THROWS_WITH(validate(c), Contains("--weight-decay"));
  }
  SECTION("adamw betas and eps") {
    c.kind = "adamw";
    c.beta1 = 1.f;
    CHECK_THROWS_WITH(validate(c), Contains("--beta1"));
    c.beta1 = 0.9f;
    c.beta2 = -0.5f;
    CHECK_THROWS_WITH(validate(c), Contains("--beta2"));
    c.beta2 = 0.999f;
    c.eps = 0.f;
    CHECK_THROWS_WITH(validate(c), Contains("--eps"));
    c.eps = 1e-8f;
    c.nesterov = true;
    CHECK_THROWS_WITH(validate(c), Contains("--nesterov"));
  }
}

TEST_CASE("bad step arguments are errors", "[optim][config]") {
  const std::size_t n = 5;
  std::vector<float> p(n, 0.5f), g(n, 0.25f);
  for (const char* kind : {"sgd", "adamw"}) {
    OptimizerConfig c;
    c.kind = kind;
    auto opt = make_optimizer(c, n, Device::cpu());
    CHECK_THROWS_WITH(opt->step(view_of(p.data(), n), view_of(g.data(), n), -0.1f),
                      Contains("--lr") && Contains("-0.1"));
    CHECK_THROWS_WITH(opt->step(view_of(p.data(), n - 1), view_of(g.data(), n - 1), 0.1f),
                      Contains("5 parameters") && Contains("4"));
    std::vector<double> pd(n);
    CHECK_THROWS_WITH(opt->step(view_of(pd.data(), n), view_of(g.data(), n), 0.1f),
                      Contains("f64"));
    CHECK_THROWS_WITH(opt->step(view_of(p.data(), n), view_of(p.data(), n), 0.1f),
                      Contains("same buffer"));
    CHECK(opt->step_count() == 0);  // nothing ran
  }
}

TEST_CASE("a CUDA optimizer in a CPU-only build is a clear error", "[optim][config]") {
  if (cuda_compiled()) return;  // the CUDA build's behaviour is covered by gpu_optim
  OptimizerConfig c;
  CHECK_THROWS_WITH(make_optimizer(c, 10, Device::cuda(0)),
                    Contains("built without CUDA") && Contains("cuda:0"));
  c.momentum = 0.f;  // no state to allocate: still refused up front
  CHECK_THROWS_WITH(make_optimizer(c, 10, Device::cuda(0)), Contains("built without CUDA"));
}
