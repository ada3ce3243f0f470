// Where the --nonfinite decision is taken: on the host for CPU buffers, on the
// device for CUDA buffers, by the same state machine (kernels/
// nonfinite_guard.cuh). A step is bad when this rank's own gradients or loss,
// or the all-reduced gradients, hold a NaN or Inf.
//
// On a GPU nothing here waits for the device: the checks and the decision are
// kernels queued on the compute stream, the optimizer is gated on the
// device-resident state (Optimizer::set_update_gate), and the host reads a
// mirror of the state that the decision kernel writes to mapped host memory.
// That mirror is current as of the host's last synchronisation with the
// device (a progress line's loss read, a checkpoint, eval): the host learns of
// a bad step at its next such point, and nothing after the bad step was applied.
//
// A non-finite local loss is carried to every rank by the all-reduce the step
// does anyway: the rank writes a NaN into the first gradient element it
// all-reduces, so the average is non-finite everywhere and all ranks decide
// the same, with no extra message.
#pragma once

#include <cstdint>

#include "kernels/nonfinite_guard.cuh"
#include "optim/cuda_backend.h"
#include "ringtrain/core/buffer_view.h"

namespace ringtrain {

class NonfiniteTracker {
 public:
  // loss_totals: the model's running loss totals (f64, at least
  // kernels::kGuardLossTotals), rolled back when a step is not applied.
  NonfiniteTracker(Device device, std::uint64_t max_consecutive_skips, BufferView loss_totals);
  ~NonfiniteTracker();
  NonfiniteTracker(const NonfiniteTracker&) = delete;
  NonfiniteTracker& operator=(const NonfiniteTracker&) = delete;

  // Before the step's first forward: remembers the loss totals.
  void begin_step(void* stream);
  // Before `slice` of this rank's gradients (starting at element `offset` of
  // the whole buffer) is all-reduced, or with the whole buffer on one rank:
  // notes its first non-finite element. The first call of a step also checks
  // the local loss and, when it is not finite, poisons slice[0] (see above).
  void check_local(BufferView slice, std::size_t offset, void* stream);
  // After the all-reduce of step `step` (1-based), `samples` local samples:
  // the decision. CPU: taken now, true when the update applies. CUDA: queued;
  // true unless the host already knows that the run stopped (the update is
  // issued and gated on the device).
  // `offset`: the element of the whole buffer `averaged` starts at (an
  // offset past the buffer's end reports the tensor as unknown: ZeRO-1's
  // one-element stand-in for gradients it holds only in shards).
  // `averaged_is_local`: `averaged` is the buffer check_local has just
  // scanned whole (one rank, no ZeRO), and is not scanned again; what the
  // local scan found decides the same (a loss-only step's poisoned element
  // is named by neither report).
  bool decide(std::uint64_t step, BufferView averaged, std::uint64_t samples, void* stream,
              std::size_t offset = 0, bool averaged_is_local = false);
  // The state after the last decision the host can see: CPU, the last one;
  // CUDA, the last one the device finished before the host's latest
  // synchronisation with it (reading it does not synchronise).
  kernels::NonfiniteGuardState observed() const;
  // --precision fp16: the loss scaler the decisions update from now on (at
  // start-up, and on resume with the checkpoint's state).
  void set_loss_scaler(const kernels::LossScalerState& scaler);
  // For Optimizer::set_update_gate: the device state (nullptr on the CPU).
  const kernels::NonfiniteGuardState* gate() const { return memory_.state; }
  bool on_device() const { return device_.is_cuda(); }

 private:
  Device device_;
  std::uint64_t max_skips_;
  BufferView loss_totals_;
  bool loss_checked_ = false;
  kernels::NonfiniteGuardState host_;  // the CPU state
  optim_cuda::GuardMemory memory_;     // the CUDA state
};

}  // namespace ringtrain
