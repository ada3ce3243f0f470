// A checkpoint saves the state buffers and the step count; restored into a
// fresh optimizer, the next step must be bit-identical to the uninterrupted run.
#include <catch2/catch.hpp>

#include <cstring>
#include <vector>

#include "ringtrain/optim/optimizer.h"
#include "tests/optim/optim_test_data.h"

using namespace ringtrain;

TEST_CASE("optimizer state round trip gives an identical next step", "[optim][state]") {
  OptimizerConfig momentum;
  momentum.kind = "sgd";
  momentum.momentum = 0.9f;
  momentum.weight_decay = 1e-4f;
  OptimizerConfig nesterov = momentum;
  nesterov.nesterov = true;
  OptimizerConfig plain = momentum;
  plain.momentum = 0.f;
  OptimizerConfig adamw;
  adamw.kind = "adamw";
  adamw.weight_decay = 0.01f;
  const std::size_t n = 1027;

  for (const OptimizerConfig& config : {plain, momentum, nesterov, adamw}) {
    CAPTURE(config.kind, config.momentum, config.nesterov);
    auto original = make_optimizer(config, n, Device::cpu());
    std::vector<float> p = test::test_vector(11, n);
    for (std::uint64_t s = 0; s < 3; ++s) {
      std::vector<float> g = test::test_vector(20 + s, n);
      original->step(view_of(p.data(), n), view_of(g.data(), n), 0.01f);
    }
    // "Checkpoint": copy every state buffer out, with its name and the step.
    std::vector<std::pair<std::string, std::vector<float>>> saved;
    for (const NamedBuffer& b : original->state()) {
      REQUIRE(b.view.count == n);
      REQUIRE(b.view.dtype == DType::f32);
      saved.emplace_back(b.name, std::vector<float>(b.view.as<float>(), b.view.as<float>() + n));
    }
    const std::uint64_t saved_steps = original->step_count();
    CHECK(saved_steps == 3);

    auto restored = make_optimizer(config, n, Device::cpu());
    auto state = restored->state();
    REQUIRE(state.size() == saved.size());
    for (std::size_t k = 0; k < state.size(); ++k) {
      CHECK(state[k].name == saved[k].first);
      std::memcpy(state[k].view.ptr, saved[k].second.data(), n * sizeof(float));
    }
    restored->set_step_count(saved_steps);

    std::vector<float> p_restored = p;
    std::vector<float> g = test::test_vector(99, n);
    original->step(view_of(p.data(), n), view_of(g.data(), n), 0.01f);
    restored->step(view_of(p_restored.data(), n), view_of(g.data(), n), 0.01f);
    CHECK(std::memcmp(p.data(), p_restored.data(), n * sizeof(float)) == 0);
    const auto a = original->state();
    const auto b = restored->state();
    for (std::size_t k = 0; k < a.size(); ++k)
      CHECK(std::memcmp(a[k].view.ptr, b[k].view.ptr, n * sizeof(float)) == 0);
    CHECK(restored->step_count() == 4);
  }
}
