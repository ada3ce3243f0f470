// --no-decay in the optimizers: an element the mask exempts updates bit for
// bit as with weight decay 0, the others as without a mask; SGD (plain,
// momentum, Nesterov) and AdamW, over the test sizes.
#include <catch2/catch.hpp>

#include <cstring>
#include <vector>

#include "ringtrain/core/error.h"
#include "ringtrain/optim/optimizer.h"
#include "tests/optim/optim_test_data.h"

using namespace ringtrain;

namespace {

OptimizerConfig config_of(const char* kind, float momentum, bool nesterov, float weight_decay) {
  OptimizerConfig c;
  c.kind = kind;
  c.momentum = momentum;
  c.nesterov = nesterov;
  c.weight_decay = weight_decay;
  return c;
}

}  // namespace

TEST_CASE("a decay mask exempts exactly its elements", "[optim][decay]") {
  const OptimizerConfig configs[] = {
      config_of("sgd", 0.f, false, 0.1f), config_of("sgd", 0.9f, false, 0.1f),
      config_of("sgd", 0.9f, true, 0.1f), config_of("adamw", 0.9f, false, 0.1f)};
  for (const OptimizerConfig& decayed : configs) {
    OptimizerConfig plain = decayed;
    plain.weight_decay = 0.f;
    for (std::size_t n : test::kTestSizes) {
      CAPTURE(decayed.kind, decayed.momentum, decayed.nesterov, n);
      std::vector<float> mask(n);
      for (std::size_t i = 0; i < n; ++i) mask[i] = (i * 7) % 3 == 0 ? 0.f : 1.f;
      auto masked = make_optimizer(decayed, n, Device::cpu());
      auto with_decay = make_optimizer(decayed, n, Device::cpu());
      auto without = make_optimizer(plain, n, Device::cpu());
      masked->set_decay_mask(view_of(mask.data(), n));
      std::vector<float> p = test::test_vector(5, n, 1.f);
      std::vector<float> p_decay = p, p_plain = p;
      for (int step = 0; step < 3; ++step) {
        const std::vector<float> g = test::test_vector(11 + step, n, 0.5f);
        masked->step(view_of(p.data(), n), view_of(g.data(), n), 0.05f);
        with_decay->step(view_of(p_decay.data(), n), view_of(g.data(), n), 0.05f);
        without->step(view_of(p_plain.data(), n), view_of(g.data(), n), 0.05f);
      }
      std::size_t wrong = 0;
      for (std::size_t i = 0; i < n; ++i) {
        const float expected = mask[i] != 0.f ? p_decay[i] : p_plain[i];
        wrong += std::memcmp(&p[i], &expected, sizeof(float)) != 0;
      }
      CHECK(wrong == 0);
    }
  }
}

TEST_CASE("a decay mask of the wrong size is refused", "[optim][decay]") {
  auto opt = make_optimizer(config_of("adamw", 0.9f, false, 0.1f), 10, Device::cpu());
  std::vector<float> mask(9, 1.f);
  CHECK_THROWS_AS(opt->set_decay_mask(view_of(mask.data(), 9)), Error);
}

TEST_CASE("state values per parameter: what model show multiplies by", "[optim]") {
  CHECK(state_values_per_parameter(config_of("sgd", 0.f, false, 0.f)) == 0);
  CHECK(state_values_per_parameter(config_of("sgd", 0.9f, false, 0.f)) == 1);
  CHECK(state_values_per_parameter(config_of("adamw", 0.9f, false, 0.f)) == 2);
  auto opt = make_optimizer(config_of("adamw", 0.9f, false, 0.f), 10, Device::cpu());
  CHECK(opt->state_bytes() == 2 * 10 * sizeof(float));
}
