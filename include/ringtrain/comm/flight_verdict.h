// The verdict from the flight recorder's files (flight_recorder.h): which rank
// is stuck or lost, in which phase of which step, and what the others wait on.
//
// File format (<dir>/rank-<r>.json, "format": "ringtrain-flight-1"): job
// (flight::job_identity(); "" in records of older builds), rank,
// world_size, host, pid, device, phase, phase_since, step, issued (the last
// sequence number issued per channel), written (when), period (the snapshot
// period), final (written by a fatal error), reason (its message) and records
// (the last K collectives: id, channel, backend, op, seq, step, bucket, bytes,
// issued, started, completed; times are wall-clock seconds, 0 = not yet).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace ringtrain {

struct FlightCollective {
  std::string channel, backend, op;
  std::uint64_t seq = 0, step = 0;
  std::int64_t bucket = -1;
  std::uint64_t bytes = 0;
  double issued = 0, started = 0, completed = 0;
};

struct FlightState {
  std::string job;
  int rank = 0, world_size = 1;
  std::string host, device;
  long pid = 0;
  std::string phase;
  double phase_since = 0;
  std::uint64_t step = 0;
  std::map<std::string, std::uint64_t> issued;
  double written = 0, period = 1;
  bool final_record = false;
  std::string reason;
  std::vector<FlightCollective> records;
};

// Every rank-<r>.json in dir, by rank. Throws Error naming dir when it holds
// none, or a file that is not a flight record.
std::vector<FlightState> read_flight_dir(const std::string& dir);

// The records of one job. A directory may hold files an earlier job left (a
// job with more ranks, in the same --logdir): those are not this job's.
struct FlightJob {
  std::string job;
  std::vector<FlightState> ranks;  // this job's, by rank
  std::vector<FlightState> stale;  // other jobs', by rank
};
// `job` "": the job of the most recently written record.
FlightJob select_job(std::vector<FlightState> all, const std::string& job = "");

// One line: the stuck or lost rank(s), their phase and step, and what the
// others wait on. now_s: the time of the verdict (wall-clock seconds); ranks
// whose record is older than a few snapshot periods are silent. live: the job
// is still running, so a silent rank on this host is looked up (gone: lost;
// stopped: SIGSTOP).
std::string flight_verdict(const std::vector<FlightState>& ranks, double now_s, bool live = true);

// "0", "1,3", "0-2,5": ranks as a compact list (sorted input).
std::string format_rank_list(const std::vector<int>& ranks);

// A table, one row per rank (phase, step, time in phase, last collectives).
std::string flight_table(const std::vector<FlightState>& ranks, double now_s,
                         std::size_t last_records = 3);

}  // namespace ringtrain
