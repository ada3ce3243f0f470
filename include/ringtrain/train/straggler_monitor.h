// Straggler attribution (--straggler-every): every N steps the ranks
// all-gather their phase times since the last report, so a rank that is
// slower than the others is named together with the phase that makes it slow
// ("rank 5 is data-bound: data wait 31 ms vs median 2 ms").
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ringtrain/comm/communicator.h"
#include "ringtrain/train/run_recorder.h"

namespace ringtrain {

// One rank's mean seconds per step over a report window. step: the rank's own
// time, without the wait for the others in the all-reduce.
struct PhaseTimes {
  double step = 0, data_wait = 0, forward = 0, backward = 0, exposed_comm = 0, optimizer = 0;
};

struct StragglerReport {
  std::uint64_t step = 0;            // the step the report was taken after
  std::vector<PhaseTimes> per_rank;  // by rank
  int slowest_rank = 0;
  double median_step = 0;
  // Set when the slowest rank's step time is >= 1.2 x the median: "rank 5 is
  // data-bound: data wait 31 ms vs median 2 ms (own step time 45 ms vs median
  // 16 ms)"; differences under 1 ms per step are not reported.
  std::optional<std::string> finding;
};

// The attribution itself, from every rank's times (pure: unit-tested).
StragglerReport attribute_stragglers(std::uint64_t step, std::vector<PhaseTimes> per_rank);

class StragglerMonitor {
 public:
  // every: steps between reports (0: off).
  explicit StragglerMonitor(std::uint64_t every) : every_(every) {}

  void add(const StepTiming& t);
  // After step `step`: on every --straggler-every'th step, all ranks exchange
  // their window over `control` (a collective: every rank calls this after
  // every step) and the window starts again.
  std::optional<StragglerReport> maybe_report(std::uint64_t step, Communicator& control);

 private:
  std::uint64_t every_;
  std::uint64_t steps_ = 0;
  PhaseTimes sum_;
};

}  // namespace ringtrain
