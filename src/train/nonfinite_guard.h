// The trainer's guard against NaN and Inf gradients (--nonfinite).
//
// The decision costs no message: it is taken on the gradients after the
// all-reduce, and a NaN or Inf on any rank makes the average non-finite on
// every rank (NaN + x = NaN, Inf + finite = Inf), so the all-reduce the step
// already does carries the flag and every rank decides the same. Only on a bad
// step do the ranks exchange one small message, to say whose local gradients
// were non-finite before the average.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "ringtrain/comm/communicator.h"
#include "ringtrain/core/buffer_view.h"
#include "ringtrain/model/model.h"
#include "ringtrain/train/nonfinite_policy.h"

namespace ringtrain {

class NonfiniteGuard {
 public:
  // ckpt_dir: named in the stop message (its newest checkpoint is the newest
  // good one: nothing is written from a bad state); may be empty.
  NonfiniteGuard(NonfinitePolicy policy, Communicator& control, const Model& model,
                 std::string ckpt_dir);

  // After the all-reduce of step `step` (1-based; the step being taken).
  // grads: the average over ranks; local_finite: this rank's own gradients
  // before the average (nullopt: not known). True when the update may be
  // applied, false when it is to be skipped; throws Error when the run stops.
  bool admit(std::uint64_t step, BufferView grads, std::optional<bool> local_finite);

  // Steps whose update was skipped so far in this run.
  std::uint64_t skipped() const { return skipped_; }

 private:
  std::string describe(std::uint64_t step, BufferView grads, std::optional<bool> local_finite);

  NonfinitePolicy policy_;
  Communicator& control_;
  const Model& model_;
  std::string ckpt_dir_;
  std::uint64_t consecutive_ = 0;
  std::uint64_t skipped_ = 0;
};

}  // namespace ringtrain
