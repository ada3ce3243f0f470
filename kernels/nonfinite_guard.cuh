// The --nonfinite decision as a small state machine over a plain struct, shared
// by the GPU (one single-thread kernel after the all-reduce, kernels/
// nonfinite_guard.cu) and the CPU path (src/optim/nonfinite_tracker.cpp), so
// the CPU tests cover the decision the GPU takes.
//
// On a GPU the state lives in device memory and the decision is taken there:
// the optimizer kernels read `apply` and do nothing on a bad step, and once
// `stopped` is latched every later update is a no-op. The host learns of it
// lazily, from a mirror in mapped host memory that it reads at points which
// synchronise anyway (progress line, checkpoint, eval, end of run).
#pragma once

#include <math.h>

#include "kernels/host_device.cuh"
#include "kernels/loss_scaler.cuh"
#include "kernels/step_divergence.cuh"

namespace ringtrain::kernels {

// "No non-finite element": the largest index, so the first bad one is a min.
inline constexpr unsigned long long kNoNonfiniteIndex = ~0ull;
// Bits of NonfiniteGuardState::local_at_last_bad.
inline constexpr unsigned long long kLocalGradientsBad = 1;
inline constexpr unsigned long long kLocalLossBad = 2;
// Loss totals the state can roll back (kernels::kLossTotalsCount).
inline constexpr int kGuardLossTotals = 3;

struct NonfiniteGuardState {
  // Inputs of the step being decided, reset by the decision.
  unsigned long long local_first_bad = kNoNonfiniteIndex;    // in this rank's own gradients
  unsigned long long local_loss_bad = 0;                     // this rank's loss of the step
  unsigned long long average_first_bad = kNoNonfiniteIndex;  // in the all-reduced gradients
  // The loss totals before the step's forward, restored when it is not applied.
  double loss_before[kGuardLossTotals] = {0, 0, 0};

  // The decision and what the host reports from it.
  unsigned long long apply = 1;    // the step's update is applied
  unsigned long long stopped = 0;  // latched: no update from now on
  unsigned long long decided = 0;  // steps decided so far (a new state for the host)
  unsigned long long consecutive = 0;
  unsigned long long skipped = 0;
  unsigned long long skipped_samples = 0;  // local samples of the skipped steps
  unsigned long long first_bad_step = 0;   // 0: none yet
  unsigned long long last_bad_step = 0;
  unsigned long long stop_step = 0;
  unsigned long long consecutive_at_last_bad = 0;
  unsigned long long local_at_last_bad = 0;  // kLocalGradientsBad | kLocalLossBad
  unsigned long long index_at_last_bad = kNoNonfiniteIndex;
  // --precision fp16: the loss scale, decided with the step (loss_scaler.cuh).
  LossScalerState scaler;
  // Every step's loss per sample against the steps before (step_divergence.cuh).
  StepDivergence divergence;
};

RT_HD bool nonfinite_value(float x) {
  return !isfinite(x);
}
RT_HD bool nonfinite_value(double x) {
  return !isfinite(x);
}

// Step `step` (1-based) with `samples` local samples, after its all-reduce:
// applies it, skips it (up to max_skips consecutive bad steps) or stops. A bad
// step is one whose averaged or local gradients or local loss are non-finite
// (under fp16 loss scaling first an overflow: see loss_scaler.cuh); the loss totals are rolled back
// to before the step when it is not applied. Returns whether the update applies.
RT_HD bool nonfinite_guard_decide(NonfiniteGuardState& s, unsigned long long step,
                                  unsigned long long max_skips, unsigned long long samples,
                                  double* loss_totals) {
  const bool local_grads_bad = s.local_first_bad != kNoNonfiniteIndex;
  const bool bad = s.average_first_bad != kNoNonfiniteIndex || local_grads_bad || s.local_loss_bad;
  ++s.decided;
  if (loss_totals != nullptr && samples > 0)
    step_divergence_observe(s.divergence, step,
                            (loss_totals[0] - s.loss_before[0]) / static_cast<double>(samples));
  if (!s.stopped) {
    if (!bad) {
      s.consecutive = 0;
      loss_scaler_update(s.scaler, false);
    } else if (loss_scaler_absorbs(s.scaler)) {
      // An fp16 overflow: the scaler's event, not a non-finite failure. The
      // step is skipped (its loss and samples leave the window like a skipped
      // step's) and does not count against --nonfinite skip:N.
      loss_scaler_update(s.scaler, true);
      s.skipped_samples += samples;
    } else {
      ++s.consecutive;
      if (s.first_bad_step == 0) s.first_bad_step = step;
      s.last_bad_step = step;
      s.consecutive_at_last_bad = s.consecutive;
      s.local_at_last_bad =
          (local_grads_bad ? kLocalGradientsBad : 0) | (s.local_loss_bad ? kLocalLossBad : 0);
      s.index_at_last_bad =
          s.average_first_bad != kNoNonfiniteIndex ? s.average_first_bad : s.local_first_bad;
      if (s.consecutive > max_skips) {
        s.stopped = 1;
        s.stop_step = step;
      } else {
        ++s.skipped;
        s.skipped_samples += samples;
      }
    }
  }
  s.apply = !bad && !s.stopped ? 1 : 0;
  if (!s.apply && loss_totals != nullptr)
    for (int k = 0; k < kGuardLossTotals; ++k) loss_totals[k] = s.loss_before[k];
  s.local_first_bad = kNoNonfiniteIndex;
  s.local_loss_bad = 0;
  s.average_first_bad = kNoNonfiniteIndex;
  return s.apply != 0;
}

// Whether an optimizer update gated by `gate` (nullptr: ungated) applies.
RT_HD bool nonfinite_gate_open(const NonfiniteGuardState* gate) {
  return gate == nullptr || gate->apply != 0;
}

// Optimizer steps actually applied when the host has issued `issued` (the
// skipped ones were issued too, as no-ops): AdamW's bias correction counts these.
RT_HD unsigned long long nonfinite_applied_steps(const NonfiniteGuardState* gate,
                                                 unsigned long long issued) {
  return gate == nullptr ? issued : issued - gate->skipped;
}

}  // namespace ringtrain::kernels
