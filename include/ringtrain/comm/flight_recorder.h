// The flight recorder: what this rank was doing when a job goes wrong.
//
// Each rank keeps, in memory, its last K collectives (sequence number, step,
// bucket, operation, bytes, backend, and the times it was issued, started and
// completed) and its current phase (data, forward, backward, all-reduce wait,
// optimizer, eval, checkpoint, ...) with the time it entered it. The CPU
// communicators record every collective they run; the trainer names the
// phases, the step and the bucket.
//
// Getting the record out must not wait on a stuck rank, so nothing is asked of
// it: a snapshot thread on every rank rewrites <dir>/rank-<r>.json every
// second (atomically, with the time it was written), and a rank that ends with
// a fatal error writes its final record there. A stalled rank's file still
// tells its phase (its snapshot thread keeps running); a rank stopped with
// SIGSTOP or killed leaves its last snapshot, at most a second old, and the
// file's age says since when it has been silent. The verdict (flight_verdict.h)
// is computed from the files alone, by the first rank that detects a problem
// or afterwards by `ringtrain doctor flight DIR`.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace ringtrain::flight {

// The page each rank keeps mapped as <dir>/rank-<r>.live (same-node readers
// see every update at once, also after the rank is stopped or killed). A
// reader takes it when version is even and unchanged across the read.
struct LiveFlightState {
  char magic[8] = {'R', 'T', 'F', 'L', 'I', 'V', 'E', '1'};
  std::atomic<std::uint64_t> version{0};
  std::int64_t pid = 0;
  double updated = 0;  // wall-clock seconds of the last update
  char phase[32] = {};
  double phase_since = 0;
  std::uint64_t step = 0;
  struct {
    char channel[24];
    std::uint64_t seq;
  } issued[4] = {};
};

// Wall-clock seconds since the epoch: comparable across ranks and files.
double wall_seconds();

// Who this rank is, for the file and the verdict. The job is job_identity().
void set_identity(int rank, int world_size, const std::string& host, const std::string& device);

// The identity of this job, the same on every rank of one launch and new for
// the next (so records an earlier job left in the same directory are told
// apart): Slurm's job and step id and requeue count where there is one, else
// the launcher's job namespace (mpirun), else this process (a rank started
// without a launcher).
std::string job_identity();

// The current phase ("data", "forward", "backward", "all-reduce wait",
// "optimizer", "eval", "checkpoint", ...) of training step `step` (1-based; 0
// outside the step loop). Collectives issued from now on carry the step.
void enter_phase(std::string_view phase, std::uint64_t step);
// The gradient bucket the next collectives belong to; -1: none.
void set_bucket(std::int64_t bucket);

// Called by the communicators: a collective was issued (returns its record
// id), started running, completed. channel: which communicator ("gradients",
// "control", or the backend's name).
std::uint64_t on_issue(std::string_view channel, std::string_view backend, std::string_view op,
                       std::uint64_t seq, std::size_t bytes);
void on_start(std::uint64_t id);
void on_complete(std::uint64_t id);

// The record as JSON (see the file format in flight_verdict.h).
std::string to_json(bool final_record, std::string_view reason);

// Writes <dir>/rank-<r>.json atomically (temporary file and rename).
void write_file(const std::string& dir, bool final_record, std::string_view reason);

// Starts the snapshot thread rewriting <dir>/rank-<r>.json every period_s
// (creates dir), and registers an abort hook that writes the final record and,
// on the first rank to get there, prints the verdict and stores it as
// <dir>/verdict.txt. capacity: K, the collectives kept.
void start(const std::string& dir, std::size_t capacity = 256, double period_s = 1.0);
// Stops the snapshot thread (a run that ends well leaves its last snapshot).
void stop();

}  // namespace ringtrain::flight
