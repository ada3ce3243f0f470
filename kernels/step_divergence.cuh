// --on-divergence on every step's loss, where the loss is: a finite loss
// that explodes (1e12 at step 5) went unflagged when only logged losses
// (--log-every 50) were compared, and turned to NaN before the first
// progress line. The --nonfinite decision (nonfinite_guard.cuh) runs after
// every step's all-reduce, on the device on a GPU, with the step's loss
// totals at hand: it feeds each step's loss per sample to this watch, so the
// check costs no host sync and no message. The host reads the watch where it
// synchronises anyway (progress line, checkpoint, end of run) and the ranks
// agree on the first diverging step there.
//
// The rule is DivergenceMonitor's (include/ringtrain/train/divergence_monitor.h)
// with a running mean for the median: a step loss kStepDivergenceFactor times
// the mean of the steps before, and more than kStepDivergenceMargin above it.
#pragma once

#include <math.h>

#include "kernels/host_device.cuh"

namespace ringtrain::kernels {

inline constexpr double kStepDivergenceFactor = 10.0;
inline constexpr double kStepDivergenceMargin = 1.0;
// Weight of the newest step in the running mean: about the last 10 steps.
inline constexpr double kStepDivergenceDecay = 0.1;

struct StepDivergence {
  unsigned long long steps = 0;       // finite steps in the running mean
  double mean = 0;                    // running mean of their losses per sample
  unsigned long long diverging = 0;   // diverging steps so far
  unsigned long long first_step = 0;  // the first diverging step (0: none)
  double first_loss = 0, first_mean = 0;
};

// The loss per sample of step `step` (1-based). A diverging step does not
// move the mean, so a run that stays exploded keeps being flagged.
RT_HD void step_divergence_observe(StepDivergence& d, unsigned long long step, double loss) {
  if (!isfinite(loss)) return;  // the --nonfinite guard's case
  if (d.steps > 0 && loss >= kStepDivergenceFactor * d.mean &&
      loss - d.mean > kStepDivergenceMargin) {
    if (d.diverging++ == 0) {
      d.first_step = step;
      d.first_loss = loss;
      d.first_mean = d.mean;
    }
    return;
  }
  d.mean = d.steps == 0 ? loss : d.mean + kStepDivergenceDecay * (loss - d.mean);
  ++d.steps;
}

}  // namespace ringtrain::kernels
