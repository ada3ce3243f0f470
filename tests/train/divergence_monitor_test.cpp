// The divergence warning: a finite loss 10x (and more than 1 above) the
// median of the recent logged losses is named with its step and factor, once
// and again only when it has grown tenfold; noise, a falling loss, tiny
// losses and non-finite ones (the --nonfinite guard's) are not.
#include <catch2/catch.hpp>

#include <limits>

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
