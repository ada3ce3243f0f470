#include "ringtrain/train/metrics_log.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include "ringtrain/core/check.h"
#include "ringtrain/core/log.h"

namespace ringtrain {

namespace fs = std::filesystem;

namespace {

// Rewrites `path` keeping only the records a resumed run at `resume_step` has
// not superseded. Goes through a temporary and a rename so that a crash here
// cannot lose the whole history.
void keep_records_through(const std::string& path, std::uint64_t resume_step) {
  std::string text;
  {
    std::ifstream in(path, std::ios::binary);
    if (!in) return;  // nothing logged yet
    std::ostringstream buffer;
    buffer << in.rdbuf();
    text = std::move(buffer).str();
  }

  std::string kept;
  std::size_t dropped_later = 0, dropped_bad = 0;
  std::size_t begin = 0;
  while (begin < text.size()) {
    const std::size_t end = text.find('\n', begin);
    if (end == std::string::npos) {
      ++dropped_bad;  // a partial last line: the writer died mid-line
      break;
    }
    const std::string line = text.substr(begin, end - begin);
    begin = end + 1;
    if (line.empty()) continue;
    const nlohmann::json record = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (record.is_discarded() || !record.is_object()) {
      ++dropped_bad;
      continue;
    }
    const auto step = metrics_record_step(record);
    if (step && *step > resume_step) {
      ++dropped_later;
      continue;
    }
    kept += line;
    kept += '\n';
  }
  if (dropped_later == 0 && dropped_bad == 0) return;
  if (dropped_later > 0)
    log_info("metrics: resuming at step {}: dropped {} record(s) of {} logged after it",
             resume_step, dropped_later, path);
  if (dropped_bad > 0) log_warn("metrics: dropped {} unreadable line(s) of {}", dropped_bad, path);

  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out.write(kept.data(), static_cast<std::streamsize>(kept.size()));
    out.flush();
    if (!out.good()) {
      const int err = errno;
      std::error_code ignored;
      fs::remove(tmp, ignored);  // a failed run leaves no temporary
      RT_CHECK(false, "metrics: cannot write {}: {}", tmp, std::strerror(err));
    }
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) {
    std::error_code ignored;
    fs::remove(tmp, ignored);
    RT_CHECK(false, "metrics: cannot rename {} to {}: {}", tmp, path, ec.message());
  }
}

}  // namespace

std::optional<std::uint64_t> metrics_record_step(const nlohmann::json& record) {
  if (!record.is_object()) return std::nullopt;
  const auto it = record.find("step");
  if (it == record.end() || !it->is_number_integer()) return std::nullopt;
  if (it->is_number_unsigned()) return it->get<std::uint64_t>();
  const std::int64_t v = it->get<std::int64_t>();
  if (v < 0) return std::nullopt;
  return static_cast<std::uint64_t>(v);
}

MetricsLog::MetricsLog(const std::string& path, std::optional<std::uint64_t> resume_step)
    : path_(path) {
  RT_CHECK(!path.empty(), "metrics: empty file name");
  const fs::path parent = fs::path(path).parent_path();
  if (!parent.empty()) {
    std::error_code ec;
    fs::create_directories(parent, ec);
    RT_CHECK(!ec, "metrics: cannot create directory {}: {}", parent.string(), ec.message());
  }
  if (resume_step) keep_records_through(path, *resume_step);
  file_ = std::fopen(path.c_str(), resume_step ? "ab" : "wb");
  RT_CHECK(file_ != nullptr, "metrics: cannot open {}: {}", path, std::strerror(errno));
}

MetricsLog::~MetricsLog() {
  if (file_) std::fclose(file_);
}

void MetricsLog::write(const nlohmann::json& record) {
  RT_CHECK(record.is_object(), "metrics: a record must be a JSON object, got {}",
           record.type_name());
  nlohmann::json stamped = record;
  if (!run_id_.empty()) stamped["run_id"] = run_id_;
  // Invalid UTF-8 in a string (a tag, a path) is replaced rather than thrown.
  std::string line = stamped.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  line += '\n';
  std::lock_guard lock(mutex_);
  const std::size_t written = std::fwrite(line.data(), 1, line.size(), file_);
  const bool flushed = std::fflush(file_) == 0;
  RT_CHECK(written == line.size() && flushed, "metrics: cannot write to {}: {}", path_,
           std::strerror(errno));
}

}  // namespace ringtrain
