// The --nonfinite decision (kernels/nonfinite_guard.cuh), which the GPU takes
// in a kernel and the CPU in NonfiniteTracker: stop at the first bad step,
// skip:N with consecutive counting reset by a good step, the first and last
// bad steps recorded, the latch after a stop, and the loss roll-back; then the
// CPU tracker's local checks, the loss check and its poisoned element.
#include <catch2/catch.hpp>

#include <cmath>
#include <iterator>
#include <limits>
#include <vector>

#include "kernels/nonfinite_guard.cuh"
#include "optim/nonfinite_tracker.h"

using namespace ringtrain;
using kernels::kNoNonfiniteIndex;
using kernels::NonfiniteGuardState;

namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// Decides step `step` with the given inputs; returns whether it applies.
bool decide(NonfiniteGuardState& s, unsigned long long step, unsigned long long max_skips,
            bool average_bad, double* loss = nullptr) {
  if (average_bad) s.average_first_bad = 7;
  return kernels::nonfinite_guard_decide(s, step, max_skips, /*samples=*/10, loss);
}

}  // namespace

TEST_CASE("stop: the first bad step stops and latches", "[optim][nonfinite]") {
  NonfiniteGuardState s;
  CHECK(decide(s, 1, 0, false));
  CHECK(decide(s, 2, 0, false));
  CHECK_FALSE(decide(s, 3, 0, true));
  CHECK(s.stopped == 1);
  CHECK(s.stop_step == 3);
  CHECK(s.first_bad_step == 3);
  CHECK(s.last_bad_step == 3);
  CHECK(s.skipped == 0);
  CHECK(s.index_at_last_bad == 7);
  // Latched: good steps after the stop apply nothing, and change no record.
  CHECK_FALSE(decide(s, 4, 0, false));
  CHECK_FALSE(decide(s, 5, 0, true));
  CHECK(s.apply == 0);
  CHECK(s.stop_step == 3);
  CHECK(s.last_bad_step == 3);
  CHECK(s.decided == 5);
}

TEST_CASE("skip:N counts consecutive bad steps and a good step resets the count",
          "[optim][nonfinite]") {
  NonfiniteGuardState s;
  CHECK(decide(s, 1, 2, false));
  CHECK_FALSE(decide(s, 2, 2, true));
  CHECK_FALSE(decide(s, 3, 2, true));
  CHECK(s.consecutive == 2);
  CHECK(s.skipped == 2);
  CHECK(s.skipped_samples == 20);
  CHECK(decide(s, 4, 2, false));  // resets the consecutive count
  CHECK(s.consecutive == 0);
  CHECK(s.consecutive_at_last_bad == 2);
  CHECK_FALSE(decide(s, 5, 2, true));
  CHECK_FALSE(decide(s, 6, 2, true));
  CHECK(s.stopped == 0);
  CHECK(s.skipped == 4);
  CHECK_FALSE(decide(s, 7, 2, true));  // the third consecutive: stop
  CHECK(s.stopped == 1);
  CHECK(s.stop_step == 7);
  CHECK(s.consecutive_at_last_bad == 3);
  CHECK(s.first_bad_step == 2);
  CHECK(s.skipped == 4);  // the stopping step is not a skip
  CHECK_FALSE(decide(s, 8, 2, false));
}

TEST_CASE("local gradients or loss alone make a bad step, and are recorded", "[optim][nonfinite]") {
  NonfiniteGuardState s;
  s.local_first_bad = 3;
  CHECK_FALSE(kernels::nonfinite_guard_decide(s, 1, 5, 1, nullptr));
  CHECK(s.local_at_last_bad == kernels::kLocalGradientsBad);
  CHECK(s.index_at_last_bad == 3);
  // The inputs are reset for the next step.
  CHECK(s.local_first_bad == kNoNonfiniteIndex);
  CHECK(s.average_first_bad == kNoNonfiniteIndex);
  s.local_loss_bad = 1;
  CHECK_FALSE(kernels::nonfinite_guard_decide(s, 2, 5, 1, nullptr));
  CHECK(s.local_at_last_bad == kernels::kLocalLossBad);
  CHECK(s.local_loss_bad == 0);
  CHECK(kernels::nonfinite_guard_decide(s, 3, 5, 1, nullptr));
}

TEST_CASE("a step that is not applied rolls the loss totals back", "[optim][nonfinite]") {
  NonfiniteGuardState s;
  double loss[3] = {4.0, 2.0, 0.0};
  s.loss_before[0] = 4.0;
  s.loss_before[1] = 2.0;
  loss[0] += 1.5;  // a good step's loss stays
  loss[1] += 1;
  CHECK(decide(s, 1, 1, false, loss));
  CHECK(loss[0] == 5.5);
  s.loss_before[0] = loss[0];
  s.loss_before[1] = loss[1];
  loss[0] = std::nan("");  // a bad step's loss goes
  CHECK_FALSE(decide(s, 2, 1, true, loss));
  CHECK(loss[0] == 5.5);
  CHECK(loss[1] == 3.0);
}

TEST_CASE("the gate: open without a state, closed on a skipped step; AdamW counts applied steps",
          "[optim][nonfinite]") {
  CHECK(kernels::nonfinite_gate_open(nullptr));
  NonfiniteGuardState s;
  CHECK(decide(s, 1, 3, false));
  CHECK(kernels::nonfinite_gate_open(&s));
  CHECK_FALSE(decide(s, 2, 3, true));
  CHECK_FALSE(kernels::nonfinite_gate_open(&s));
  CHECK(kernels::nonfinite_applied_steps(&s, 3) == 2);
  CHECK(kernels::nonfinite_applied_steps(nullptr, 3) == 3);
}

TEST_CASE("the CPU tracker finds this rank's first bad gradient and its bad loss",
          "[optim][nonfinite]") {
  std::vector<double> totals = {1.0, 0.0, 0.0};
  BufferView loss{totals.data(), totals.size(), DType::f64, Device::cpu()};
  NonfiniteTracker t(Device::cpu(), 1, loss);
  std::vector<float> grads(10, 1.f);
  const BufferView g = view_of(grads.data(), grads.size());

  // A good step.
  t.begin_step(nullptr);
  totals[0] += 2.0;
  t.check_local(g.slice(5, 5), 5, nullptr);
  t.check_local(g.slice(0, 5), 0, nullptr);
  CHECK(t.decide(1, g, 4, nullptr));
  CHECK(t.observed().skipped == 0);
  CHECK(totals[0] == 3.0);

  // A NaN in the second bucket launched (elements 0..4): index 2 is named.
  t.begin_step(nullptr);
  grads[2] = kNaN;
  t.check_local(g.slice(5, 5), 5, nullptr);
  t.check_local(g.slice(0, 5), 0, nullptr);
  CHECK_FALSE(t.decide(2, g, 4, nullptr));
  NonfiniteGuardState s = t.observed();
  CHECK(s.index_at_last_bad == 2);
  CHECK(s.local_at_last_bad == kernels::kLocalGradientsBad);
  CHECK(s.skipped == 1);
  CHECK(s.skipped_samples == 4);
  grads[2] = 1.f;

  // A non-finite loss with finite gradients: the first slice checked carries
  // a NaN into the all-reduce, the loss is rolled back, and it is the second
  // consecutive bad step of skip:1, so the run stops.
  t.begin_step(nullptr);
  totals[0] = std::numeric_limits<double>::infinity();
  t.check_local(g.slice(5, 5), 5, nullptr);
  CHECK(std::isnan(grads[5]));
  t.check_local(g.slice(0, 5), 0, nullptr);
  CHECK_FALSE(t.decide(3, g, 4, nullptr));
  s = t.observed();
  CHECK(s.local_at_last_bad == kernels::kLocalLossBad);
  CHECK(s.stopped == 1);
  CHECK(s.stop_step == 3);
  CHECK(totals[0] == 3.0);
  CHECK(t.gate() == nullptr);
}

TEST_CASE("one rank: the decision from the local scan alone equals the one that scans again",
          "[optim][nonfinite]") {
  // One rank without ZeRO: the averaged gradient is the buffer check_local
  // scanned whole, so decide does not scan it again. Both trackers see the
  // same steps; every decision and what it records must agree.
  std::vector<double> totals_a = {1.0, 0.0, 0.0}, totals_b = totals_a;
  NonfiniteTracker again(Device::cpu(), 1,
                         BufferView{totals_a.data(), 3, DType::f64, Device::cpu()});
  NonfiniteTracker local(Device::cpu(), 1,
                         BufferView{totals_b.data(), 3, DType::f64, Device::cpu()});
  struct Step {
    int bad_index;  // -1: none
    bool bad_loss;
  };
  const Step steps[] = {{-1, false}, {7, false}, {-1, false}, {3, false}, {-1, true}, {2, true}};
  for (std::uint64_t k = 0; k < std::size(steps); ++k) {
    CAPTURE(k);
    bool applied[2] = {};
    NonfiniteTracker* trackers[2] = {&again, &local};
    std::vector<double>* totals[2] = {&totals_a, &totals_b};
    for (int w = 0; w < 2; ++w) {
      std::vector<float> grads(10);
      for (std::size_t i = 0; i < grads.size(); ++i) grads[i] = 0.25f * static_cast<float>(i + k);
      if (steps[k].bad_index >= 0) grads[static_cast<std::size_t>(steps[k].bad_index)] = kNaN;
      const BufferView g = view_of(grads.data(), grads.size());
      trackers[w]->begin_step(nullptr);
      (*totals[w])[0] += steps[k].bad_loss ? std::numeric_limits<double>::infinity() : 1.0;
      trackers[w]->check_local(g, 0, nullptr);
      applied[w] = trackers[w]->decide(k + 1, g, 4, nullptr, 0, /*averaged_is_local=*/w == 1);
    }
    CHECK(applied[0] == applied[1]);
    CHECK(applied[1] == (steps[k].bad_index < 0 && !steps[k].bad_loss));
    const NonfiniteGuardState a = again.observed(), b = local.observed();
    CHECK(a.skipped == b.skipped);
    CHECK(a.stopped == b.stopped);
    CHECK(a.last_bad_step == b.last_bad_step);
    CHECK(a.local_at_last_bad == b.local_at_last_bad);
    if (!steps[k].bad_loss) CHECK(a.index_at_last_bad == b.index_at_last_bad);
    if (k == 3) CHECK(b.index_at_last_bad == 3);
    CHECK(totals_a == totals_b);
  }
  CHECK(local.observed().stop_step == 5);
}
