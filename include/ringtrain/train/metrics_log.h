// metrics.jsonl: one JSON object per line, one line per logged step and per
// evaluation, flushed as it is written so `tail -f` and plotting scripts see
// it live and a crash loses at most the line being written.
#pragma once

#include <cstdint>
#include <cstdio>
#include <mutex>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace ringtrain {

class MetricsLog {
 public:
  // Opens `path` (creating its directory). A new run (resume_step unset)
  // starts the file afresh. A resumed run keeps the records up to and including
  // `resume_step`, drops those a previous run logged after it (they will be
  // logged again) and any partial last line left by a crash, then appends.
  MetricsLog(const std::string& path, std::optional<std::uint64_t> resume_step);
  ~MetricsLog();
  MetricsLog(const MetricsLog&) = delete;
  MetricsLog& operator=(const MetricsLog&) = delete;

  // Writes `record` as one line (it must be a JSON object) and flushes it.
  // Non-finite numbers are written as null, as JSON has no NaN. Thread-safe.
  void write(const nlohmann::json& record);

  const std::string& path() const { return path_; }
  // Every record written after this carries "run_id": `id`, so that the
  // records of the launches that append to one file (resumes, restarts) are
  // told apart, as W&B's and MLflow's run ids do.
  void set_run_id(std::string id) { run_id_ = std::move(id); }

 private:
  std::string path_;
  std::string run_id_;
  std::FILE* file_ = nullptr;
  std::mutex mutex_;
};

// The step a metrics record belongs to: its integer "step" field, if any.
std::optional<std::uint64_t> metrics_record_step(const nlohmann::json& record);

}  // namespace ringtrain
