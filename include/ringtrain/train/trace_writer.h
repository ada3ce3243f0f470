// Chrome-trace timeline (the JSON format chrome://tracing and Perfetto open,
// as Horovod's timeline writes it): one complete event ("ph":"X") per span,
// with pid = rank and tid = a lane ("data", "compute", "comm", "optimizer",
// ...), so overlap of backward and each bucket's all-reduce is visible.
//
// Each rank records its own spans in memory; nothing here talks to other
// ranks. Two ways to get one file for the job:
//   * shared file system: every rank calls write_rank_file(path), the trainer
//     runs a barrier, then rank 0 calls merge_trace_files(path, world_size);
//   * otherwise: the trainer gathers serialize() from every rank with its
//     communicator and rank 0 writes merge_traces(documents).
// Span times are monotonic_seconds() values. Each rank's document carries the
// wall-clock time of its own origin, and merging shifts ranks onto a common
// time axis, so ranks on one node line up exactly and across nodes as well as
// their clocks agree (NTP).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace ringtrain {

class TraceWriter {
 public:
  // A disabled writer drops every span at the cost of one branch, so callers
  // need no "if tracing" around them. Beyond `max_events` spans are dropped and
  // counted (the document says how many), bounding memory on long runs.
  explicit TraceWriter(int rank, bool enabled = true,
                       std::size_t max_events = std::size_t{1} << 21);
  TraceWriter(const TraceWriter&) = delete;
  TraceWriter& operator=(const TraceWriter&) = delete;

  bool enabled() const { return enabled_; }
  int rank() const { return rank_; }

  // Records [start_s, end_s] (monotonic_seconds() values) on `lane`. `args`
  // (a JSON object, or null for none) shows in the viewer's detail pane.
  // Thread-safe: the communication thread records its buckets here too.
  void span(std::string_view name, std::string_view lane, double start_s, double end_s,
            const nlohmann::json& args = nullptr);

  // Records from construction to destruction.
  class Scope {
   public:
    Scope(TraceWriter* writer, std::string name, std::string lane, nlohmann::json args);
    Scope(Scope&& other) noexcept;
    Scope& operator=(Scope&&) = delete;
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;
    ~Scope();
    // Ends the span now rather than at destruction.
    void end();

   private:
    TraceWriter* writer_;
    std::string name_, lane_;
    nlohmann::json args_;
    double start_s_;
  };
  [[nodiscard]] Scope scope(std::string name, std::string lane, nlohmann::json args = nullptr);

  std::size_t event_count() const;
  std::size_t dropped_count() const;

  // This rank's spans as a complete Chrome-trace document:
  // {"traceEvents": [...], "displayTimeUnit": "ms", "otherData": {...}}.
  std::string serialize() const;

  // Writes serialize() to rank_file_path(path, rank()).
  void write_rank_file(const std::string& path) const;
  // "<path>.rank-<rank>.json"
  static std::string rank_file_path(const std::string& path, int rank);

 private:
  struct Event {
    std::string name;
    int tid;
    std::int64_t start_ns;  // since origin_
    std::int64_t dur_ns;
    nlohmann::json args;
  };
  int lane_id(std::string_view lane);  // caller holds mutex_

  int rank_;
  bool enabled_;
  std::size_t max_events_;
  double origin_s_;              // monotonic_seconds() at construction
  std::int64_t origin_unix_us_;  // the wall clock at that moment
  mutable std::mutex mutex_;
  std::vector<Event> events_;
  std::size_t dropped_ = 0;
  std::map<std::string, int, std::less<>> lanes_;
};

// Merges per-rank documents (serialize() output, any order) into one document
// on a common time axis that starts at the earliest rank's origin.
std::string merge_traces(const std::vector<std::string>& rank_documents);

// Reads rank_file_path(path, r) for r in [0, world_size), writes the merged
// document to `path` and removes the per-rank files. A missing or unreadable
// rank file is an Error naming it.
void merge_trace_files(const std::string& path, int world_size);

}  // namespace ringtrain
