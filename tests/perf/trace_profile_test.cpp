#include <catch2/catch.hpp>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "ringtrain/core/error.h"
#include "ringtrain/core/timer.h"
#include "ringtrain/perf/trace_profile.h"
#include "ringtrain/train/trace_writer.h"

using namespace ringtrain;

namespace {
// Steps as the trainer records them, one every 20 ms: data wait, forward,
// backward with two bucket launches inside it, a 1 ms wait, optimizer. Step 0
// (warm-up) has a backward twice as long.
nlohmann::json four_steps(bool with_bytes = true) {
  TraceWriter w(0);
  const double t0 = monotonic_seconds();
  for (int i = 0; i < 4; ++i) {
    const double s = t0 + 20e-3 * i, slow = i == 0 ? 6e-3 : 0;
    w.span("data wait", "data", s, s + 1e-3);
    w.span("forward", "compute", s + 1e-3, s + 4e-3);
    w.span("backward", "compute", s + 4e-3, s + 10e-3 + slow);
    auto args = [&](double bytes) {
      return with_bytes ? nlohmann::json{{"bytes", bytes}} : nlohmann::json(nullptr);
    };
    w.span("bucket 0 ready", "gradients", s + 5e-3, s + 5e-3, args(400));
    w.span("allreduce bucket 0", "comm", s + 5e-3, s + 7e-3);
    w.span("bucket 1 ready", "gradients", s + 9e-3, s + 9e-3, args(800));
    w.span("allreduce bucket 1", "comm", s + 9e-3, s + 11e-3);
    w.span("optimizer", "compute", s + 11e-3 + slow, s + 12e-3 + slow);
  }
  return nlohmann::json::parse(w.serialize());
}
}  // namespace

TEST_CASE("step profile from a trace: medians after the warm-up") {
  const TraceProfile tp = profile_from_trace(four_steps(), 0, 1);
  // Steps 1 and 2 (3 has no next step to close its period).
  CHECK(tp.steps_used == 2);
  CHECK(tp.ranks == 1);
  const StepProfile& p = tp.profile;
  CHECK(p.backward_s == Approx(6e-3).margin(2e-6));
  CHECK(p.optimizer_s == Approx(1e-3).margin(2e-6));
  // Period 20 ms less backward 6, the 1 ms wait after it, optimizer 1.
  CHECK(p.before_backward_s == Approx(12e-3).margin(4e-6));
  REQUIRE(p.buckets.size() == 2);
  CHECK(p.buckets[0].bytes == 400);
  CHECK(p.buckets[0].ready_s == Approx(1e-3).margin(2e-6));
  CHECK(p.buckets[1].bytes == 800);
  CHECK(p.buckets[1].ready_s == Approx(5e-3).margin(2e-6));
}

TEST_CASE("step profile: clear errors for traces it cannot use") {
  CHECK_THROWS_WITH(profile_from_trace(four_steps(false), 0, 1),
                    Catch::Contains("has no bucket size"));
  CHECK_THROWS_WITH(profile_from_trace(four_steps(), 0, 3), Catch::Contains("at least 5"));
  CHECK_THROWS_WITH(profile_from_trace(four_steps(), 2, 1), Catch::Contains("no events of rank 2"));
  CHECK_THROWS_AS(profile_from_trace(nlohmann::json::object(), 0, 1), Error);
}
