// LR schedules checked at chosen steps: warmup boundaries, cosine midpoint and
// end, step-decay boundaries; the linear scaling rule; bad configs.
#include <catch2/catch.hpp>

#include <cmath>
#include <numbers>

#include "ringtrain/core/error.h"
#include "ringtrain/optim/lr_schedule.h"

using namespace ringtrain;
using Catch::Matchers::Contains;

namespace {
LrScheduleConfig schedule(const char* kind, float base_lr, std::uint64_t warmup) {
  LrScheduleConfig c;
  c.kind = kind;
  c.base_lr = base_lr;
  c.warmup_steps = warmup;
  return c;
}
}  // namespace

TEST_CASE("constant schedule, with and without warmup", "[optim][lr]") {
  const LrSchedule flat(schedule("constant", 0.3f, 0));
  CHECK(flat.lr_at(0) == Approx(0.3));
  CHECK(flat.lr_at(123456789) == Approx(0.3));

  const LrSchedule warm(schedule("constant", 0.4f, 4));
  CHECK(warm.lr_at(0) == Approx(0.1));  // (0 + 1) / 4: the first step already moves
  CHECK(warm.lr_at(1) == Approx(0.2));
  CHECK(warm.lr_at(2) == Approx(0.3));
  CHECK(warm.lr_at(3) == Approx(0.4));  // last warmup step reaches base_lr
  CHECK(warm.lr_at(4) == Approx(0.4));
  CHECK(warm.lr_at(1000) == Approx(0.4));
}

TEST_CASE("linear warmup then cosine", "[optim][lr]") {
  LrScheduleConfig c = schedule("cosine", 1.0f, 10);
  c.total_steps = 110;
  c.min_lr = 0.1f;
  const LrSchedule s(c);
  CHECK(s.lr_at(0) == Approx(0.1));
  CHECK(s.lr_at(4) == Approx(0.5));
  CHECK(s.lr_at(9) == Approx(1.0));   // end of warmup
  CHECK(s.lr_at(10) == Approx(1.0));  // cosine starts at base_lr
  CHECK(s.lr_at(35) == Approx(0.1 + 0.9 * 0.5 * (1 + std::cos(std::numbers::pi / 4))));
  CHECK(s.lr_at(60) == Approx(0.55));  // midpoint: halfway between base and min
  CHECK(s.lr_at(109) == Approx(0.1 + 0.9 * 0.5 * (1 + std::cos(std::numbers::pi * 0.99))));
  CHECK(s.lr_at(110) == Approx(0.1));   // end
  CHECK(s.lr_at(5000) == Approx(0.1));  // stays at min_lr past the end
  for (std::uint64_t step = 10; step < 110; ++step) CHECK(s.lr_at(step + 1) <= s.lr_at(step));

  LrScheduleConfig no_warmup = schedule("cosine", 0.5f, 0);
  no_warmup.total_steps = 4;
  const LrSchedule short_cos(no_warmup);
  CHECK(short_cos.lr_at(0) == Approx(0.5));
  CHECK(short_cos.lr_at(2) == Approx(0.25));
  CHECK(short_cos.lr_at(4) == Approx(0.0).margin(1e-12));
}

TEST_CASE("step schedule: gamma every step_size steps after warmup", "[optim][lr]") {
  LrScheduleConfig c = schedule("step", 0.1f, 0);
  c.step_size = 30;
  c.gamma = 0.1f;
  const LrSchedule s(c);
  CHECK(s.lr_at(0) == Approx(0.1));
  CHECK(s.lr_at(29) == Approx(0.1));
  CHECK(s.lr_at(30) == Approx(0.01));
  CHECK(s.lr_at(59) == Approx(0.01));
  CHECK(s.lr_at(60) == Approx(0.001));
  CHECK(s.lr_at(90) == Approx(0.0001));

  c.warmup_steps = 5;
  c.gamma = 0.5f;
  const LrSchedule warm(c);
  CHECK(warm.lr_at(0) == Approx(0.02));
  CHECK(warm.lr_at(4) == Approx(0.1));
  CHECK(warm.lr_at(34) == Approx(0.1));  // 29 steps after warmup
  CHECK(warm.lr_at(35) == Approx(0.05));
  CHECK(warm.lr_at(65) == Approx(0.025));
}

TEST_CASE("linear scaling rule", "[optim][lr]") {
  CHECK(linear_scaled_lr(0.1f, 8192, 256) == Approx(3.2));
  CHECK(linear_scaled_lr(0.1f, 256, 256) == Approx(0.1));
  CHECK(linear_scaled_lr(0.1f, 64, 256) == Approx(0.025));
  CHECK_THROWS_WITH(linear_scaled_lr(0.1f, 64, 0), Contains("--reference-batch"));
  CHECK_THROWS_WITH(linear_scaled_lr(0.1f, 0, 256), Contains("global batch"));
  CHECK_THROWS_WITH(linear_scaled_lr(-0.1f, 64, 256), Contains("--lr"));
  // Used with warmup: the scaled rate is what the warmup ramps to.
  const LrSchedule s(schedule("constant", linear_scaled_lr(0.1f, 1024, 256), 5));
  CHECK(s.lr_at(0) == Approx(0.08));
  CHECK(s.lr_at(4) == Approx(0.4));
}

TEST_CASE("bad schedule configs name the flag and the value", "[optim][lr]") {
  CHECK_THROWS_WITH(LrSchedule(schedule("cosin", 0.1f, 0)),
                    Contains("'cosin'") && Contains("--lr-schedule"));
  CHECK_THROWS_WITH(LrSchedule(schedule("constant", -0.5f, 0)),
                    Contains("--lr") && Contains("-0.5"));
  CHECK_THROWS_WITH(LrSchedule(schedule("constant", NAN, 0)), Contains("--lr"));
  LrScheduleConfig cos = schedule("cosine", 0.1f, 100);
  cos.total_steps = 100;
  CHECK_THROWS_WITH(LrSchedule(cos), Contains("--total-steps") && Contains("--warmup-steps"));
  cos.total_steps = 1000;
  cos.min_lr = 0.2f;
  CHECK_THROWS_WITH(LrSchedule(cos), Contains("--min-lr"));
  LrScheduleConfig st = schedule("step", 0.1f, 0);
  st.step_size = 0;
  CHECK_THROWS_WITH(LrSchedule(st), Contains("--lr-step-size"));
  st.step_size = 10;
  st.gamma = 1.5f;
  CHECK_THROWS_WITH(LrSchedule(st), Contains("--lr-gamma") && Contains("1.5"));
}
