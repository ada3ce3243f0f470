#include <catch2/catch.hpp>

#include "ringtrain/core/error.h"
#include "ringtrain/perf/compute_curve.h"

using namespace ringtrain;

namespace {
// A fixed cost of 2 ms per step plus 0.1 ms per sample up to batch 48, and a
// cheaper 0.08 ms per sample above it: 4.4, 6.8 and 10.64 ms at 24, 48 and 96.
ComputeCurve measured() {
  return ComputeCurve({{96, 10.64e-3}, {24, 4.4e-3}, {48, 6.8e-3}});
}
}  // namespace

TEST_CASE("compute curve: the measured batches, and linear between them") {
  const ComputeCurve c = measured();
  REQUIRE(c.points().size() == 3);
  CHECK(c.points().front().batch == 24);  // sorted
  CHECK(c.step_s_at(24) == Approx(4.4e-3));
  CHECK(c.step_s_at(48) == Approx(6.8e-3));
  CHECK(c.step_s_at(96) == Approx(10.64e-3));
  CHECK(c.step_s_at(36) == Approx(5.6e-3));   // halfway between 24 and 48
  CHECK(c.step_s_at(72) == Approx(8.72e-3));  // halfway between 48 and 96
}

TEST_CASE("compute curve: outside the measured batches") {
  const ComputeCurve c = measured();
  // Below: the line through 24 and 48, 2 ms + 0.1 ms per sample.
  CHECK(c.step_s_at(12) == Approx(3.2e-3));
  CHECK(c.step_s_at(1) == Approx(2.1e-3));
  // Above: the line through 48 and 96, 2.96 ms + 0.08 ms per sample.
  CHECK(c.step_s_at(192) == Approx(18.32e-3));
  // A line that would make a smaller batch cheaper than in proportion (more
  // than proportional cost per sample) is held to the proportion.
  const ComputeCurve steep({{10, 1e-3}, {20, 3e-3}});
  CHECK(steep.step_s_at(5) == Approx(0.5e-3));
  // Above the range no step is cheaper than the largest measured one.
  const ComputeCurve falling({{10, 2e-3}, {20, 1.5e-3}});
  CHECK(falling.step_s_at(40) == Approx(1.5e-3));
  // One point: in proportion to the batch.
  const ComputeCurve one({{32, 8e-3}});
  CHECK(one.step_s_at(16) == Approx(4e-3));
  CHECK(one.step_s_at(64) == Approx(16e-3));
}

TEST_CASE("compute curve: bad points are errors") {
  CHECK_THROWS_WITH(ComputeCurve({}), Catch::Contains("no measured batch"));
  CHECK_THROWS_WITH(ComputeCurve({{0, 1e-3}}), Catch::Contains("must be positive"));
  CHECK_THROWS_WITH(ComputeCurve({{8, -1e-3}}), Catch::Contains("must be positive"));
  CHECK_THROWS_WITH(ComputeCurve({{8, 1e-3}, {8, 2e-3}}), Catch::Contains("measured twice"));
  CHECK_THROWS_WITH(measured().step_s_at(0), Catch::Contains("not positive"));
}

TEST_CASE("compute curve: ranks computing at once on one machine") {
  // Alone: 4.4, 6.8 ms at 24, 48. Three at once (sharing two cores): 7.0 and
  // 11.0 ms, measured at the slowest rank. Two at once: not measured.
  const ComputeCurve c({{24, 4.4e-3}, {48, 6.8e-3}, {24, 7.0e-3, 3}, {48, 11.0e-3, 3}});
  CHECK(c.step_s_at(24) == Approx(4.4e-3));
  CHECK(c.step_s_at(24, 1) == Approx(4.4e-3));
  CHECK(c.step_s_at(24, 3) == Approx(7.0e-3));
  // Between: the curve alone (5.6 ms at 36) times the slowdown, linear from
  // 7.0/4.4 at 24 to 11.0/6.8 at 48.
  CHECK(c.step_s_at(36, 3) == Approx(5.6e-3 * (7.0 / 4.4 + 11.0 / 6.8) / 2));
  // Outside the count's batches: the nearest one's slowdown on the curve alone.
  CHECK(c.step_s_at(12, 3) == Approx(3.2e-3 * 7.0 / 4.4));
  CHECK(c.step_s_at(96, 3) == Approx(c.step_s_at(96) * 11.0 / 6.8));
  // Not measured: the nearest measured count below it.
  CHECK(c.measured_colocated(2) == 1);
  CHECK(c.step_s_at(48, 2) == Approx(6.8e-3));
  CHECK(c.measured_colocated(8) == 3);
  CHECK(c.step_s_at(48, 8) == Approx(11.0e-3));
  // Only co-located points: below them, the smallest measured count.
  const ComputeCurve only3({{24, 7.0e-3, 3}});
  CHECK(only3.measured_colocated(1) == 3);
  CHECK(only3.step_s_at(12, 1) == Approx(3.5e-3));
  // The same batch at two counts is two points; twice at one count is an error.
  CHECK_THROWS_WITH(ComputeCurve({{8, 1e-3, 2}, {8, 2e-3, 2}}),
                    Catch::Contains("batch 8 is measured twice with 2 co-located ranks"));
  CHECK_THROWS_WITH(ComputeCurve({{8, 1e-3, 0}}), Catch::Contains("0 co-located ranks"));
}

TEST_CASE("compute curve: a slowdown timed side by side replaces the ratio of two runs") {
  // Alone 4.4 ms at 24 (a run in a fast spell) and 6.8 at 48; two at once
  // 6.0 ms at 24 in a slow spell (x1.36 over the run alone), but x1.05 side by
  // side with one rank alone in the same seconds: the curve takes x1.05.
  const ComputeCurve c({{24, 4.4e-3}, {48, 6.8e-3}, {24, 6.0e-3, 2, 1.05}});
  CHECK(c.step_s_at(24, 2) == Approx(4.4e-3 * 1.05));
  CHECK(c.step_s_at(36, 2) == Approx(5.6e-3 * 1.05));
  // A point without one keeps its step over the curve alone.
  const ComputeCurve mixed({{24, 4.4e-3}, {24, 6.0e-3, 2, 1.05}, {24, 8.8e-3, 3}});
  CHECK(mixed.step_s_at(24, 3) == Approx(8.8e-3));
  CHECK_THROWS_WITH(ComputeCurve({{8, 1e-3, 2, -1.0}}), Catch::Contains("negative slowdown"));
}
