#include "ringtrain/train/straggler_monitor.h"

#include <algorithm>

#include <fmt/format.h>

#include "core/median.h"

namespace ringtrain {

namespace {

constexpr double kStragglerFactor = 1.2;
// Differences below a millisecond per step are scheduling noise, not a finding.
constexpr double kNoiseFloorSeconds = 1e-3;

std::string ms(double s) {
  return fmt::format("{:.1f} ms", s * 1e3);
}

}  // namespace

StragglerReport attribute_stragglers(std::uint64_t step, std::vector<PhaseTimes> per_rank) {
  StragglerReport r;
  r.step = step;
  r.per_rank = std::move(per_rank);
  if (r.per_rank.empty()) return r;
  std::vector<double> steps;
  for (const auto& p : r.per_rank) steps.push_back(p.step);
  r.median_step = median(steps);
  r.slowest_rank = static_cast<int>(std::max_element(steps.begin(), steps.end()) - steps.begin());
  const PhaseTimes& slow = r.per_rank[static_cast<std::size_t>(r.slowest_rank)];
  if (r.per_rank.size() < 2 || slow.step < kStragglerFactor * r.median_step ||
      slow.step - r.median_step < kNoiseFloorSeconds)
    return r;

  // The phase whose excess over the median of that phase is largest. Exposed
  // communication is left out: a slow rank makes the others wait in the
  // all-reduce, not itself.
  struct Phase {
    const char* label;  // "data wait"
    const char* bound;  // "data-bound"
    double PhaseTimes::*field;
  };
  const Phase phases[] = {
      {"data wait", "data-bound", &PhaseTimes::data_wait},
      {"forward", "compute-bound", &PhaseTimes::forward},
      {"backward", "compute-bound", &PhaseTimes::backward},
      {"optimizer", "compute-bound", &PhaseTimes::optimizer},
      {"exposed communication", "communication-bound", &PhaseTimes::exposed_comm}};
  const Phase* worst = nullptr;
  double worst_excess = 0, worst_median = 0;
  for (const Phase& ph : phases) {
    std::vector<double> v;
    for (const auto& p : r.per_rank) v.push_back(p.*ph.field);
    const double med = median(v);
    const double excess = slow.*ph.field - med;
    if (!worst || excess > worst_excess) {
      worst = &ph;
      worst_excess = excess;
      worst_median = med;
    }
  }
  r.finding = fmt::format("rank {} is {}: {} {} vs median {} (own step time {} vs median {})",
                          r.slowest_rank, worst->bound, worst->label, ms(slow.*worst->field),
                          ms(worst_median), ms(slow.step), ms(r.median_step));
  return r;
}

void StragglerMonitor::add(const StepTiming& t) {
  if (every_ == 0) return;
  ++steps_;
  // A rank's own time: the step without the wait for the others in the
  // all-reduce (in a synchronous step every rank's total is the slowest's).
  sum_.step += t.total - t.exposed_comm;
  sum_.data_wait += t.data_wait;
  sum_.forward += t.forward;
  sum_.backward += t.backward;
  sum_.exposed_comm += t.exposed_comm;
  sum_.optimizer += t.optimizer;
}

std::optional<StragglerReport> StragglerMonitor::maybe_report(std::uint64_t step,
                                                              Communicator& control) {
  if (every_ == 0 || step % every_ != 0 || steps_ == 0) return std::nullopt;
  constexpr std::size_t kFields = 6;
  static_assert(sizeof(PhaseTimes) == kFields * sizeof(double));
  const double n = static_cast<double>(steps_);
  PhaseTimes mine{sum_.step / n,     sum_.data_wait / n,    sum_.forward / n,
                  sum_.backward / n, sum_.exposed_comm / n, sum_.optimizer / n};
  std::vector<PhaseTimes> all(static_cast<std::size_t>(control.size()));
  all[static_cast<std::size_t>(control.rank())] = mine;
  control.allgather(BufferView{&all[static_cast<std::size_t>(control.rank())], kFields, DType::f64,
                               Device::cpu()},
                    BufferView{all.data(), all.size() * kFields, DType::f64, Device::cpu()});
  steps_ = 0;
  sum_ = {};
  return attribute_stragglers(step, std::move(all));
}

}  // namespace ringtrain
