// How the CPU backends wait (comm/deadline.h): a short spin, then naps that
// never yield the core, doubling for waits that drive MPI progress. The
// assertions count polls, never time a speed: a loaded machine only makes
// naps longer, so every bound below holds on a busy host too.
#include <catch2/catch.hpp>

#include <sys/prctl.h>

#include <chrono>
#include <vector>

#include "comm/deadline.h"

using namespace ringtrain::comm_detail;
using Clock = std::chrono::steady_clock;

namespace {

// Every poll's time since the wait began; the condition never holds.
struct PollLog {
  Clock::time_point start = Clock::now();
  std::vector<double> at_us;
  bool poll() {
    at_us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - start).count());
    return false;
  }
  int polls_between(double from_us, double to_us) const {
    int n = 0;
    for (double t : at_us) n += (t >= from_us && t < to_us) ? 1 : 0;
    return n;
  }
};

}  // namespace

TEST_CASE("a wait returns at the first poll that finds the condition") {
  int polls = 0;
  REQUIRE(spin_until([&] { return ++polls == 5; }, Deadline(10)));
  REQUIRE(polls == 5);
}

TEST_CASE("a wait that never ends returns false at its deadline, having waited it out") {
  // Not early: when it gives up, its own deadline has passed (the deadline's
  // verdict, not a stopwatch in the test).
  const Deadline deadline(0.05);
  int polls = 0;
  REQUIRE_FALSE(spin_until([&] { return ++polls < 0; }, deadline, kProgressBackoff));
  REQUIRE(deadline.expired());
  REQUIRE(polls > 1);  // it kept polling until then
}

TEST_CASE("a progress wait naps after its spin, the naps doubling to the cap") {
  PollLog log;
  REQUIRE_FALSE(spin_until([&] { return log.poll(); }, Deadline(0.06), kProgressBackoff));
  // After the 20 us spin only naps: 20, 40, 80, then 160 us. A yield phase
  // (a poll per sched_yield, a microsecond each on an idle core) would poll
  // hundreds of times in the first millisecond.
  CHECK(log.polls_between(60, 1000) <= 12);
  // 59 ms of naps of at least 160 us each.
  CHECK(log.polls_between(1000, 60000) <= 59000 / 160 + 2);
  // The naps do end: the wait polled through to its deadline.
  CHECK(log.polls_between(30000, 60000) >= 2);
}

TEST_CASE("a shared-memory wait naps 50 us at a time, without doubling") {
  PollLog log;
  REQUIRE_FALSE(spin_until([&] { return log.poll(); }, Deadline(0.02), kMemoryBackoff));
  CHECK(log.polls_between(60, 20000) <= 20000 / 50 + 2);
  CHECK(log.polls_between(10000, 20000) >= 2);
}

TEST_CASE("a wait tightens its thread's timer slack so that short naps stay short") {
  REQUIRE_FALSE(spin_until([] { return false; }, Deadline(0.001), kProgressBackoff));
  CHECK(prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0) == 1000);
}
