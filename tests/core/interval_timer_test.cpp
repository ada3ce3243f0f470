// IntervalTimer on the CPU: a steady clock per interval, 0 for an interval not
// marked since the last collect, and collect clears the marks. (The GPU path,
// CUDA timing events, is the same bookkeeping around cudaEventElapsedTime.)
#include <catch2/catch.hpp>

#include <chrono>
#include <thread>

#include "ringtrain/core/error.h"
#include "ringtrain/core/host_sync.h"
#include "ringtrain/core/interval_timer.h"

using namespace ringtrain;

TEST_CASE("interval timer on the CPU", "[core]") {
  IntervalTimer timer(Device::cpu(), nullptr, 3);
  REQUIRE(timer.size() == 3);
  timer.start(0);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  timer.stop(0);
  timer.start(2);
  timer.stop(2);
  timer.start(1);  // started, never stopped: reads 0
  const std::uint64_t syncs = host_sync::count();
  const std::vector<double> ms = timer.collect("test");
  CHECK(host_sync::count() == syncs);  // the CPU reads its clock, nothing to wait for
  REQUIRE(ms.size() == 3);
  CHECK(ms[0] >= 19.0);
  CHECK(ms[0] < 10000.0);
  CHECK(ms[1] == 0.0);
  CHECK(ms[2] >= 0.0);
  CHECK(ms[2] < ms[0]);
  // Marked again: the last pair counts; collect cleared the earlier marks.
  timer.start(2);
  timer.stop(2);
  const std::vector<double> again = timer.collect("test");
  CHECK(again[0] == 0.0);
  CHECK(again[2] >= 0.0);
  CHECK_THROWS_AS(timer.start(3), Error);
  CHECK_THROWS_AS(timer.stop(1), Error);  // not started
}
