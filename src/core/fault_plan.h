// The faults a test plants in a run, read once from the environment
// (RINGTRAIN_FAULT_*), so that the failure paths (the --nonfinite guard, the
// replica check, timeouts, the flight recorder, a rank that never joins NCCL)
// can be tested end to end:
//
//   RINGTRAIN_FAULT_NAN_RANK=r          a NaN in rank r's first parameter gradient
//     [_NAN_STEP=s (1)] [_NAN_COUNT=n (1)]   in steps s..s+n-1, before the all-reduce;
//     [_NAN_WHAT=loss|gradient (gradient)]   or in its loss of those steps instead
//   RINGTRAIN_FAULT_DIVERGE_RANK=r      rank r's first weight nudged after step 1
//   RINGTRAIN_FAULT_STEP_DELAY_MS=d     every step d ms longer (scheduler tests)
//   RINGTRAIN_FAULT_STALL_RANK=r        rank r sleeps t seconds when it reaches
//     RINGTRAIN_FAULT_STALL_PHASE=p       point p: open (the data set), data,
//     [_STALL_STEP=s (any step)]          forward, backward, all-reduce wait,
//     [_STALL_SECONDS=t (3600)]           optimizer
//   RINGTRAIN_FAULT_NCCL_LATE_RANK=r    rank r joins the NCCL communicator only
//     [_NCCL_LATE_SECONDS=t (600)]        after t seconds
//
// A value that does not parse, or a RINGTRAIN_FAULT_* name not listed here,
// is an InputError naming the variable. Optional variables without their
// RANK variable are ignored (scripts unset the rank to end a fault).
//
// The code that acts on the plan reads it through planned(), which is null
// when nothing is planned: a normal run pays one pointer test per hook.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>

namespace ringtrain {

struct FaultPlan {
  struct NonfiniteFault {
    int rank = 0;
    std::uint64_t first_step = 1;  // steps count from 1
    std::uint64_t steps = 1;
    bool in_loss = false;  // else in the first parameter gradient
    bool at(int r, std::uint64_t step) const {
      return r == rank && step >= first_step && step - first_step < steps;
    }
  };
  struct StallFault {
    int rank = 0;
    std::string phase;
    std::optional<std::uint64_t> step;  // any step when unset
    double seconds = 3600;
  };
  struct LateJoinFault {
    int rank = 0;
    double seconds = 600;
  };

  std::optional<NonfiniteFault> nonfinite;
  std::optional<int> diverge_rank;
  std::uint64_t step_delay_ms = 0;
  std::optional<StallFault> stall;
  std::optional<LateJoinFault> nccl_late;

  bool empty() const {
    return !nonfinite && !diverge_rank && step_delay_ms == 0 && !stall && !nccl_late;
  }

  // vars: the RINGTRAIN_FAULT_* variables by name. Throws Error naming the
  // variable whose value does not parse.
  static FaultPlan parse(const std::map<std::string, std::string>& vars);
  // The process's plan, parsed from the environment on the first call (an
  // InputError then, and on every later call); null when nothing is planned.
  static const FaultPlan* planned();

  // Whether the stall fault names this rank, point and step (step 0: a point
  // outside the step loop, e.g. "open").
  bool stalls_at(std::string_view point, int rank, std::uint64_t step) const;
  // How a stall waits: the thread's sleep in a run; a test passes its own, to
  // see what was asked for without reading a clock.
  using Sleeper = std::function<void(double seconds)>;
  static void sleep_seconds(double seconds);
  // Sleeps for the stall's seconds when stalls_at().
  void stall_at(std::string_view point, int rank, std::uint64_t step,
                const Sleeper& sleep = sleep_seconds) const;
  // Sleeps before this rank joins the NCCL communicator, when planned.
  void delay_nccl_join(int rank) const;
};

}  // namespace ringtrain
