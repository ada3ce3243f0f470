// The trainer's guard against NaN and Inf loss and gradients (--nonfinite).
//
// The decision costs no message: a NaN or Inf in any rank's gradients makes
// the all-reduced average non-finite on every rank (NaN + x = NaN, Inf +
// finite = Inf), and a rank whose own loss is non-finite poisons one element
// of what it all-reduces, so the all-reduce the step already does carries the
// flag and every rank decides the same (src/optim/nonfinite_tracker.h). Only
// when a bad step is reported do the ranks exchange one small message, to say
// whose own values were non-finite before the average.
//
// CPU: the decision is taken and reported in the step. GPU: it is taken on the
// device, with no host sync; the optimizer's update is a no-op there on a bad
// step (and on every step after a stop), and the host reports it at its next
// synchronisation point (report(): a progress line, eval, checkpoint, the end
// of the run), at most one log interval later. The step numbers, ranks and
// tensor in the message are those the device recorded at the bad step.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "optim/nonfinite_tracker.h"
#include "ringtrain/comm/communicator.h"
#include "ringtrain/core/buffer_view.h"
#include "ringtrain/model/model.h"
#include "ringtrain/train/nonfinite_policy.h"

namespace ringtrain {

class NonfiniteGuard {
 public:
  // ckpt_dir: named in the stop message (its newest checkpoint is the newest
  // good one: nothing is written from a bad state); may be empty.
  // loss_totals: the model's running loss totals (rolled back on a bad step).
  NonfiniteGuard(NonfinitePolicy policy, Communicator& control, const Model& model,
                 std::string ckpt_dir, Device device, BufferView loss_totals);

  // Before the step's first forward.
  void begin_step(void* stream) { tracker_.begin_step(stream); }
  // Before a slice of this rank's gradients is all-reduced
  // (GradientSynchronizer's local check).
  void check_local(BufferView slice, std::size_t offset, void* stream) {
    tracker_.check_local(slice, offset, stream);
  }
  // After the all-reduce of step `step` (1-based; the step being taken) with
  // `samples` local samples; grads: the average over ranks. True when the
  // update is to be issued (on a GPU it is gated on the device), false when it
  // is skipped; throws Error when the run stops (CPU: here; GPU: in report()).
  // offset, grads_is_local: see NonfiniteTracker::decide.
  bool admit(std::uint64_t step, BufferView grads, std::uint64_t samples, void* stream,
             std::size_t offset = 0, bool grads_is_local = false);
  // Reports what the host has not yet reported: the skips (a warning), or the
  // stop (throws Error). Call where the host has just synchronised with the
  // device (after the loss read), on every rank at the same step.
  void report();
  // The same where the host has not synchronised: waits for the device first
  // (a counted host sync; for checkpoint, eval and the end of the run only).
  void sync_and_report();
  // Only the wait of sync_and_report(), for a caller that reads the state
  // (step_divergence()) before report() may throw.
  void sync();
  // --on-divergence's watch of every step's loss (kernels/step_divergence.cuh),
  // as of the host's last synchronisation with the device (no sync here).
  kernels::StepDivergence step_divergence() const { return tracker_.observed().divergence; }
  // --precision fp16's loss scaler (kernels/loss_scaler.cuh): set at start-up
  // and on resume; decided with every step.
  void set_loss_scaler(const kernels::LossScalerState& scaler) { tracker_.set_loss_scaler(scaler); }
  // Its state after the last decision: CPU, this step's; GPU, a sync waits for
  // the device first (a counted host sync) when `current`.
  kernels::LossScalerState loss_scaler(bool current);
  // For Optimizer::set_update_gate (nullptr on the CPU).
  const kernels::NonfiniteGuardState* gate() const { return tracker_.gate(); }

  // Steps whose update was skipped so far in this run, as reported.
  std::uint64_t skipped() const { return seen_.skipped; }
  // Local samples of the skipped steps reported since the last call: the loss
  // window drops them (the device rolled their loss back).
  std::uint64_t take_skipped_samples();

 private:
  std::string describe(const kernels::NonfiniteGuardState& s);

  NonfinitePolicy policy_;
  Communicator& control_;
  const Model& model_;
  std::string ckpt_dir_;
  Device device_;
  NonfiniteTracker tracker_;
  kernels::NonfiniteGuardState seen_;  // as of the last report
  std::uint64_t samples_taken_ = 0;
};

}  // namespace ringtrain
