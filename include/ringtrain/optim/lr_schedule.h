// Learning-rate schedules, as a pure function of the global step, so a resumed
// run needs only the step to continue on the same curve.
//
// Every kind starts with an optional linear warmup: for step < warmup_steps,
// lr = base_lr * (step + 1) / warmup_steps, so the first step already moves and
// step warmup_steps - 1 reaches base_lr (Goyal et al. 2017, used together with
// linear_scaled_lr). After warmup, with s = step - warmup_steps:
//   constant  base_lr
//   cosine    min_lr + (base_lr - min_lr) * (1 + cos(pi * s / (total_steps - warmup_steps))) / 2,
//             and min_lr from total_steps on
//   step      base_lr * gamma^floor(s / step_size)
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace ringtrain {

struct LrScheduleConfig {
  std::string kind = "constant";  // constant | cosine | step
  float base_lr = 0.1f;
  std::uint64_t warmup_steps = 0;
  std::uint64_t total_steps = 0;   // cosine: where it reaches min_lr
  std::uint64_t step_size = 1000;  // step: decay every step_size steps
  float gamma = 0.1f;              // step: decay factor
  float min_lr = 0.f;              // cosine: floor
};

class LrSchedule {
 public:
  // Throws Error naming the flag (--lr-schedule, --lr, --warmup-steps,
  // --total-steps, --lr-step-size, --lr-gamma, --min-lr) and the bad value.
  explicit LrSchedule(LrScheduleConfig config);
  float lr_at(std::uint64_t step) const;
  const LrScheduleConfig& config() const { return config_; }

 private:
  enum class Kind { constant, cosine, step };
  LrScheduleConfig config_;
  Kind kind_ = Kind::constant;
};

// The linear scaling rule: base_lr * global_batch / reference_batch, where
// global_batch = per-rank batch x world size x accumulation steps. Pair it with
// a warmup: large scaled rates diverge in the first steps without one.
float linear_scaled_lr(float base_lr, std::size_t global_batch, std::size_t reference_batch);

}  // namespace ringtrain
