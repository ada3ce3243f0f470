// The pure parts of the "when a job goes wrong" tools: the straggler
// attribution and the flight recorder's verdict over hand-made records.
#include <catch2/catch.hpp>

#include "ringtrain/comm/flight_verdict.h"
#include "ringtrain/train/straggler_monitor.h"

using namespace ringtrain;

namespace {

PhaseTimes even(double scale) {
  // Per-rank times that differ a little (never all equal), in seconds.
  return {0.010 * scale, 0.001 * scale, 0.003 * scale, 0.005 * scale, 0.002, 0.001 * scale};
}

FlightCollective gradients(std::uint64_t seq, std::uint64_t step, int bucket, bool done) {
  FlightCollective c;
  c.channel = "gradients";
  c.backend = "shm";
  c.op = "allreduce";
  c.seq = seq;
  c.step = step;
  c.bucket = bucket;
  c.bytes = 4096;
  c.issued = 100.0 + static_cast<double>(seq);
  c.started = c.issued + 0.001;
  c.completed = done ? c.issued + 0.002 : 0;
  return c;
}

FlightState rank_state(int rank, const std::string& phase, std::uint64_t step,
                       std::uint64_t issued) {
  FlightState s;
  s.rank = rank;
  s.world_size = 4;
  s.host = "node07";
  s.device = "cpu";
  s.pid = 999999999;  // no such process
  s.phase = phase;
  s.phase_since = 1000;
  s.step = step;
  s.written = 1060;
  s.issued["gradients"] = issued;
  for (std::uint64_t q = 1; q <= issued; ++q)
    s.records.push_back(gradients(q, (q + 1) / 2, static_cast<int>((q + 1) % 2), q < 2 * step - 1));
  return s;
}

}  // namespace

TEST_CASE(
    "straggler attribution names the slow rank and its phase, and no one when all are equal") {
  std::vector<PhaseTimes> ranks = {even(1.0), even(1.02), even(0.98), even(1.01)};
  StragglerReport r = attribute_stragglers(100, ranks);
  CHECK_FALSE(r.finding);
  CHECK(r.median_step == Approx(0.01005));

  ranks[2].data_wait += 0.030;
  ranks[2].step += 0.030;
  r = attribute_stragglers(200, ranks);
  REQUIRE(r.finding);
  CHECK(r.slowest_rank == 2);
  CHECK(r.finding->rfind(
            "rank 2 is data-bound: data wait 31.0 ms vs median 1.0 ms (own step time 39.8 ms vs "
            "median 10.",
            0) == 0);

  ranks = {even(1.0), even(1.0), even(1.0), even(1.0)};
  ranks[1].backward += 0.020;
  ranks[1].step += 0.020;
  r = attribute_stragglers(300, ranks);
  REQUIRE(r.finding);
  CHECK(r.finding->rfind("rank 1 is compute-bound: backward 25.0 ms vs median 5.0 ms", 0) == 0);
}

TEST_CASE("the flight verdict names the rank that never issued what the others wait in") {
  // Ranks 0, 1 and 3 issued both buckets of step 3 and wait in the first;
  // rank 2 is still loading the data of step 3.
  std::vector<FlightState> ranks = {
      rank_state(0, "all-reduce wait", 3, 6), rank_state(1, "all-reduce wait", 3, 6),
      rank_state(2, "data", 3, 4), rank_state(3, "all-reduce wait", 3, 6)};
  const std::string v = flight_verdict(ranks, 1062, /*live=*/false);
  CHECK(v ==
        "rank 2 (host node07, cpu) has been in phase 'data' of step 3 for 62 s; ranks 0-1,3 are "
        "waiting in all-reduce #5 (bucket 0 of step 3) on the gradients channel (shm), which "
        "rank 2 never issued");
  // A rank silent for longer than a few snapshot periods is said to be so.
  ranks[2].written = 1050;
  CHECK(flight_verdict(ranks, 1062, false)
            .rfind("rank 2 (host node07, cpu) has been silent for 12 s (stopped or lost); it was "
                   "last in phase 'data' of step 3; ranks 0-1,3 are waiting",
                   0) == 0);
  const std::string table = flight_table(ranks, 1062);
  CHECK(table.find("data") != std::string::npos);
  CHECK(table.find("gradients allreduce#5 b0 running") != std::string::npos);
}

TEST_CASE("rank lists are compact") {
  CHECK(format_rank_list({0, 1, 2, 4, 6, 7}) == "0-2,4,6-7");
  CHECK(format_rank_list({3}) == "3");
}

TEST_CASE("records an earlier job left in the directory are not this job's") {
  // An earlier 4-rank job left ranks 0-3; this 2-rank job rewrote ranks 0-1.
  std::vector<FlightState> all;
  for (int r = 0; r < 4; ++r) {
    FlightState s = rank_state(r, "all-reduce wait", 5, 10);
    s.job = "mpirun 111";
    s.written = 500;
    all.push_back(s);
  }
  for (int r = 0; r < 2; ++r) {
    all[static_cast<std::size_t>(r)].job = "mpirun 222";
    all[static_cast<std::size_t>(r)].world_size = 2;
    all[static_cast<std::size_t>(r)].written = 900;
  }
  const FlightJob newest = select_job(all);
  CHECK(newest.job == "mpirun 222");
  REQUIRE(newest.ranks.size() == 2);
  REQUIRE(newest.stale.size() == 2);
  CHECK(newest.stale[0].rank == 2);
  CHECK(newest.stale[1].rank == 3);
  // The verdict over this job's records never names the earlier job's ranks.
  const std::string verdict = flight_verdict(newest.ranks, 1000, /*live=*/false);
  CHECK(verdict.find("rank 3") == std::string::npos);
  CHECK(verdict.find("rank 2") == std::string::npos);
  const FlightJob earlier = select_job(all, "mpirun 111");
  CHECK(earlier.ranks.size() == 2);
  CHECK(earlier.stale.size() == 2);
}

TEST_CASE("a rank still finishing a collective another rank completed is lagging, not waiting") {
  // Both ranks agreed on an error after the control all-gather #6; rank 1
  // stopped first and reads rank 0's record, written before rank 0 saw the
  // last of #6's data.
  auto control = [](std::uint64_t seq, const char* op, bool done) {
    FlightCollective c = gradients(seq, 1, -1, done);
    c.channel = "control";
    c.op = op;
    return c;
  };
  std::vector<FlightState> ranks = {rank_state(0, "optimizer", 1, 0),
                                    rank_state(1, "optimizer", 1, 0)};
  for (FlightState& s : ranks) {
    s.world_size = 2;
    s.issued["control"] = 6;
    for (std::uint64_t q = 1; q <= 5; ++q) s.records.push_back(control(q, "allgather", true));
  }
  ranks[0].records.push_back(control(6, "allgather", false));
  ranks[1].records.push_back(control(6, "allgather", true));
  ranks[1].final_record = true;
  ranks[1].reason = "non-finite gradients at step 1";
  CHECK(flight_verdict(ranks, 1062, /*live=*/false) ==
        "no rank is waiting in a collective; rank 1 ended with: non-finite gradients at step 1");

  // A broadcast's root completes before the others join it: rank 0 still
  // waits in it, and the verdict says so.
  ranks[0].records.back() = control(6, "broadcast", false);
  ranks[1].records.back() = control(6, "broadcast", true);
  CHECK(flight_verdict(ranks, 1062, false).find("rank 0 is waiting in broadcast #6") !=
        std::string::npos);
}
