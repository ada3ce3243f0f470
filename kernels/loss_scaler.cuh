// fp16's dynamic loss scaling as a small state machine over a plain struct,
// with the defaults of PyTorch's GradScaler: the loss is multiplied by `scale`
// before backward (so small activation gradients survive fp16's range), the
// gradients are divided by it before the optimizer, and a step whose
// gradients overflowed (Inf or NaN) is skipped and halves the scale; 2000
// clean steps in a row double it. It lives inside the --nonfinite guard's
// state (kernels/nonfinite_guard.cuh), so the GPU takes the decision on the
// device and the CPU tests cover the same code.
#pragma once

#include "kernels/host_device.cuh"

namespace ringtrain::kernels {

// More overflows in a row than this and the step counts as non-finite under
// --nonfinite: from 2^16, 40 halvings reach 2^-24, below which no gradient a
// finite loss produces can overflow, so the cause is not the scale.
inline constexpr unsigned long long kMaxConsecutiveOverflows = 40;

struct LossScalerState {
  unsigned long long enabled = 0;  // 0: no loss scaling (fp32, bf16)
  float scale = 1.0f;
  float growth_factor = 2.0f, backoff_factor = 0.5f;
  unsigned long long growth_interval = 2000;
  unsigned long long growth_tracker = 0;  // clean steps since the last change
  unsigned long long overflows = 0;       // steps skipped for an overflow, in total
  unsigned long long consecutive_overflows = 0;
  unsigned long long changes = 0;  // times the scale changed (the host reports new values)
};

// After a step's gradients were checked: an overflow backs the scale off and
// restarts the growth count; a clean step counts towards growth.
RT_HD void loss_scaler_update(LossScalerState& s, bool overflow) {
  if (!s.enabled) return;
  if (overflow) {
    s.scale *= s.backoff_factor;
    s.growth_tracker = 0;
    ++s.overflows;
    ++s.consecutive_overflows;
    ++s.changes;
    return;
  }
  s.consecutive_overflows = 0;
  if (++s.growth_tracker == s.growth_interval) {
    s.scale *= s.growth_factor;
    s.growth_tracker = 0;
    ++s.changes;
  }
}

// Whether a bad step is the scaler's business (an overflow: skip, back off)
// rather than the --nonfinite policy's.
RT_HD bool loss_scaler_absorbs(const LossScalerState& s) {
  return s.enabled && s.consecutive_overflows < kMaxConsecutiveOverflows;
}

}  // namespace ringtrain::kernels
