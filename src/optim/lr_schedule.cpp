#include "ringtrain/optim/lr_schedule.h"

#include <cmath>
#include <numbers>
#include <utility>

#include "ringtrain/core/check.h"

namespace ringtrain {

LrSchedule::LrSchedule(LrScheduleConfig config) : config_(std::move(config)) {
  const LrScheduleConfig& c = config_;
  if (c.kind == "constant")
    kind_ = Kind::constant;
  else if (c.kind == "cosine")
    kind_ = Kind::cosine;
  else if (c.kind == "step")
    kind_ = Kind::step;
  else
    RT_CHECK(false, "unknown LR schedule '{}' (--lr-schedule): expected constant, cosine or step",
             c.kind);
  RT_CHECK(std::isfinite(c.base_lr) && c.base_lr >= 0.f, "--lr must be finite and >= 0, got {}",
           c.base_lr);
  if (kind_ == Kind::cosine) {
    RT_CHECK(c.total_steps > c.warmup_steps,
             "--lr-schedule cosine needs --total-steps ({}) greater than --warmup-steps ({})",
             c.total_steps, c.warmup_steps);
    RT_CHECK(std::isfinite(c.min_lr) && c.min_lr >= 0.f && c.min_lr <= c.base_lr,
             "--min-lr must be in [0, --lr = {}], got {}", c.base_lr, c.min_lr);
  }
  if (kind_ == Kind::step) {
    RT_CHECK(c.step_size > 0, "--lr-step-size must be > 0, got {}", c.step_size);
    RT_CHECK(std::isfinite(c.gamma) && c.gamma > 0.f && c.gamma <= 1.f,
             "--lr-gamma must be in (0, 1], got {}", c.gamma);
  }
}

float LrSchedule::lr_at(std::uint64_t step) const {
  const LrScheduleConfig& c = config_;
  const double base = c.base_lr;
  if (step < c.warmup_steps)
    return static_cast<float>(base * static_cast<double>(step + 1) /
                              static_cast<double>(c.warmup_steps));
  const std::uint64_t s = step - c.warmup_steps;
  switch (kind_) {
    case Kind::constant:
      return c.base_lr;
    case Kind::cosine: {
      const std::uint64_t span = c.total_steps - c.warmup_steps;
      if (s >= span) return c.min_lr;
      const double progress = static_cast<double>(s) / static_cast<double>(span);
      const double min_lr = c.min_lr;
      return static_cast<float>(min_lr + (base - min_lr) * 0.5 *
                                             (1.0 + std::cos(std::numbers::pi * progress)));
    }
    case Kind::step: {
      const std::uint64_t decays = s / c.step_size;  // floor: decay at whole multiples
      return static_cast<float>(
          base * std::pow(static_cast<double>(c.gamma), static_cast<double>(decays)));
    }
  }
  return c.base_lr;
}

float linear_scaled_lr(float base_lr, std::size_t global_batch, std::size_t reference_batch) {
  RT_CHECK(reference_batch > 0, "--reference-batch must be > 0, got {}", reference_batch);
  RT_CHECK(global_batch > 0, "linear LR scaling: the global batch must be > 0, got {}",
           global_batch);
  RT_CHECK(std::isfinite(base_lr) && base_lr >= 0.f, "--lr must be finite and >= 0, got {}",
           base_lr);
  return static_cast<float>(static_cast<double>(base_lr) * static_cast<double>(global_batch) /
                            static_cast<double>(reference_batch));
}

}  // namespace ringtrain
