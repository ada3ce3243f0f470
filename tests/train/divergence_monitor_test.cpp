// The divergence warning: a finite loss 10x (and more than 1 above) the
// median of the recent logged losses is named with its step and factor, once
// and again only when it has grown tenfold; noise, a falling loss, tiny
// losses and non-finite ones (the --nonfinite guard's) are not.
// The same rule on every step's loss, where it is computed (step_divergence.cuh).
#include <catch2/catch.hpp>

#include <limits>

#include "kernels/nonfinite_guard.cuh"
#include "ringtrain/train/divergence_monitor.h"

using namespace ringtrain;
using Catch::Matchers::Contains;

TEST_CASE("a falling or noisy loss is not diverging", "[train][divergence]") {
  DivergenceMonitor m;
  const double losses[] = {2.3, 2.1, 2.6, 1.9, 4.1, 1.5, 1.2, 3.0, 0.9};
  std::uint64_t step = 0;
  for (double l : losses) CHECK_FALSE(m.observe(step += 10, l));
}

TEST_CASE("an exploding loss is named with its step and factor", "[train][divergence]") {
  DivergenceMonitor m;
  CHECK_FALSE(m.observe(1, 2.0));
  CHECK_FALSE(m.observe(2, 2.2));
  CHECK_FALSE(m.observe(3, 1.8));
  const auto first = m.observe(4, 1.7e6);
  REQUIRE(first);
  CHECK_THAT(*first, Contains("loss diverging at step 4") && Contains("1.7e+06") &&
                         Contains("8.5e+05x the median 2") && Contains("last 3 logged losses"));
  // Told once: the same level again is not repeated...
  CHECK_FALSE(m.observe(5, 2e6));
  // ... a tenfold larger factor is.
  const auto again = m.observe(6, 1e9);
  REQUIRE(again);
  CHECK_THAT(*again, Contains("at step 6"));
}

TEST_CASE("tiny losses, and NaN or Inf, are not this monitor's", "[train][divergence]") {
  DivergenceMonitor m;
  CHECK_FALSE(m.observe(1, 0.01));
  CHECK_FALSE(m.observe(2, 0.5));  // 50x, but only 0.49 above the median
  CHECK_FALSE(m.observe(3, std::numeric_limits<double>::quiet_NaN()));
  CHECK_FALSE(m.observe(4, std::numeric_limits<double>::infinity()));
}

// --on-divergence on every step (kernels/step_divergence.cuh): the watch the
// --nonfinite decision feeds with each step's loss per sample, on the device.
TEST_CASE("every step's loss: an explosion is named by its step", "[train][divergence]") {
  kernels::StepDivergence d;
  const double healthy[] = {2.3, 2.1, 2.6, 1.9, 2.4, 1.5};
  unsigned long long step = 0;
  for (double l : healthy) kernels::step_divergence_observe(d, ++step, l);
  CHECK(d.diverging == 0);
  CHECK(d.first_step == 0);
  const double mean_before = d.mean;
  kernels::step_divergence_observe(d, ++step, 1e12);  // step 7
  CHECK(d.diverging == 1);
  CHECK(d.first_step == 7);
  CHECK(d.first_loss == 1e12);
  CHECK(d.first_mean == mean_before);
  // It stays exploded: still diverging, the first step and the mean kept.
  kernels::step_divergence_observe(d, ++step, 5e11);
  CHECK(d.diverging == 2);
  CHECK(d.first_step == 7);
  CHECK(d.mean == mean_before);
  // NaN is the --nonfinite guard's; a tiny loss's noise is not divergence.
  kernels::StepDivergence q;
  kernels::step_divergence_observe(q, 1, std::numeric_limits<double>::quiet_NaN());
  CHECK(q.steps == 0);
  kernels::step_divergence_observe(q, 2, 0.01);
  kernels::step_divergence_observe(q, 3, 0.5);  // 50x, but only 0.49 above
  CHECK(q.diverging == 0);
}

TEST_CASE("the --nonfinite decision feeds each step's loss per sample to the watch",
          "[train][divergence]") {
  kernels::NonfiniteGuardState s;
  double totals[kernels::kGuardLossTotals] = {0, 0, 0};
  // Step losses (sums over 4 samples): 8, 8.8, then 4e6 at step 3.
  const double step_sums[] = {8.0, 8.8, 4e6};
  for (unsigned long long step = 1; step <= 3; ++step) {
    for (int k = 0; k < kernels::kGuardLossTotals; ++k) s.loss_before[k] = totals[k];
    totals[0] += step_sums[step - 1];
    CHECK(kernels::nonfinite_guard_decide(s, step, 0, /*samples=*/4, totals));
  }
  CHECK(s.divergence.first_step == 3);
  CHECK(s.divergence.first_loss == Approx(1e6));
  CHECK(s.divergence.first_mean == Approx(2.0 + 0.1 * (2.2 - 2.0)));
}
