// fp16's dynamic loss scaling (kernels/loss_scaler.cuh) inside the --nonfinite
// decision (kernels/nonfinite_guard.cuh), the code the GPU runs in a kernel:
// growth after the window, back-off and skip on an overflow without counting
// it as a non-finite skip, the limit after which an overflow is a failure
// again; and the rounding to the 16-bit grids (kernels/precision.cuh).
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>

#include "kernels/nonfinite_guard.cuh"
#include "kernels/precision.cuh"

using namespace ringtrain;
using kernels::LossScalerState;
using kernels::NonfiniteGuardState;

namespace {

NonfiniteGuardState with_scaler(float scale, unsigned long long window) {
  NonfiniteGuardState s;
  s.scaler.enabled = 1;
  s.scaler.scale = scale;
  s.scaler.growth_interval = window;
  return s;
}

bool decide(NonfiniteGuardState& s, unsigned long long step, bool bad, double* loss = nullptr) {
  if (bad) s.average_first_bad = 3;
  return kernels::nonfinite_guard_decide(s, step, /*max_skips=*/0, /*samples=*/8, loss);
}

}  // namespace

TEST_CASE("loss scaler: grows after the window, backs off and skips on an overflow",
          "[optim][loss_scaler]") {
  NonfiniteGuardState s = with_scaler(65536.0f, 3);
  CHECK(decide(s, 1, false));
  CHECK(decide(s, 2, false));
  CHECK(s.scaler.scale == 65536.0f);
  CHECK(decide(s, 3, false));
  CHECK(s.scaler.scale == 131072.0f);  // three clean steps
  CHECK(s.scaler.growth_tracker == 0);
  double loss[3] = {5, 6, 7};
  s.loss_before[0] = 1;
  s.loss_before[1] = 2;
  s.loss_before[2] = 3;
  CHECK_FALSE(decide(s, 4, true, loss));  // overflow: skipped...
  CHECK(s.scaler.scale == 65536.0f);      // ...and the scale halved
  CHECK(s.scaler.overflows == 1);
  CHECK(loss[0] == 1);  // the step's loss leaves the totals
  // Not a non-finite failure: --nonfinite stop (max_skips 0) did not stop.
  CHECK(s.stopped == 0);
  CHECK(s.skipped == 0);
  CHECK(s.first_bad_step == 0);
  CHECK(s.skipped_samples == 8);
  CHECK(decide(s, 5, false));
  CHECK(decide(s, 6, false));
  CHECK(s.scaler.scale == 65536.0f);  // the window restarted at the overflow
  CHECK(decide(s, 7, false));
  CHECK(s.scaler.scale == 131072.0f);
  CHECK(s.scaler.changes == 3);
}

TEST_CASE("loss scaler: overflows in a row past the limit are a non-finite failure",
          "[optim][loss_scaler]") {
  NonfiniteGuardState s = with_scaler(1.0f, 2000);
  for (unsigned long long k = 1; k <= kernels::kMaxConsecutiveOverflows; ++k) {
    CHECK_FALSE(decide(s, k, true));
    CHECK(s.stopped == 0);
  }
  CHECK(s.scaler.scale == std::ldexp(1.0f, -static_cast<int>(kernels::kMaxConsecutiveOverflows)));
  // The next bad step goes to the --nonfinite policy: stop.
  CHECK_FALSE(decide(s, kernels::kMaxConsecutiveOverflows + 1, true));
  CHECK(s.stopped == 1);
  CHECK(s.stop_step == kernels::kMaxConsecutiveOverflows + 1);
}

TEST_CASE("loss scaler: disabled, a bad step is the --nonfinite policy's", "[optim][loss_scaler]") {
  NonfiniteGuardState s;  // fp32/bf16: no scaler
  CHECK_FALSE(decide(s, 1, true));
  CHECK(s.stopped == 1);
  CHECK(s.scaler.scale == 1.0f);
}

TEST_CASE("rounding to the bf16 and fp16 grids", "[ops][precision]") {
  using kernels::round_to_bf16_grid;
  using kernels::round_to_fp16_grid;
  // bf16 keeps 8 significant bits: 1 + 2^-8 is a tie, rounded to even (1);
  // 1 + 3 * 2^-8 is a tie rounded up to 1 + 2^-6.
  CHECK(round_to_bf16_grid(1.0f + std::ldexp(1.0f, -8)) == 1.0f);
  CHECK(round_to_bf16_grid(1.0f + 3 * std::ldexp(1.0f, -8)) == 1.0f + std::ldexp(1.0f, -6));
  CHECK(round_to_bf16_grid(1.0f + std::ldexp(1.0f, -7)) == 1.0f + std::ldexp(1.0f, -7));
  CHECK(round_to_bf16_grid(1e30f) / 1e30f > 0.99f);  // bf16 has fp32's range
  CHECK(std::isnan(round_to_bf16_grid(std::numeric_limits<float>::quiet_NaN())));
  // fp16: 11 significant bits, largest finite 65504, Inf from 65520 on.
  CHECK(round_to_fp16_grid(1.0f + std::ldexp(1.0f, -11)) == 1.0f);
  CHECK(round_to_fp16_grid(1.0f + std::ldexp(1.0f, -10)) == 1.0f + std::ldexp(1.0f, -10));
  CHECK(round_to_fp16_grid(65504.0f) == 65504.0f);
  CHECK(round_to_fp16_grid(65519.0f) == 65504.0f);
  CHECK(std::isinf(round_to_fp16_grid(65520.0f)));
  CHECK(std::isinf(round_to_fp16_grid(-1e6f)));
  CHECK(round_to_fp16_grid(std::ldexp(1.0f, -24)) == std::ldexp(1.0f, -24));  // smallest subnormal
  CHECK(round_to_fp16_grid(std::ldexp(1.0f, -26)) == 0.0f);
  // fp32 is left as it is.
  CHECK(kernels::round_to_precision_grid(1.0f + std::ldexp(1.0f, -20), DType::f32) ==
        1.0f + std::ldexp(1.0f, -20));
}
