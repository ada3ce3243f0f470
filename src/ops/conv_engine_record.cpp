#include "ops/conv_engine_record.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string_view>
#include <utility>

#include "ringtrain/core/check.h"
#include "ringtrain/core/log.h"

namespace ringtrain::detail {

EngineChoiceRecord::EngineChoiceRecord(std::string path) : path_(std::move(path)) {}

void EngineChoiceRecord::load_once() {
  if (loaded_) return;
  loaded_ = true;
  if (path_.empty()) return;
  std::ifstream in(path_, std::ios::binary);
  if (!in) return;  // not yet written: the first run on this machine
  std::stringstream text;
  text << in.rdbuf();
  const std::string all = text.str();
  unfinished_tail_ = !all.empty() && all.back() != '\n';
  // Complete lines only: a final fragment without its newline is a write that
  // did not finish.
  std::size_t at = 0;
  for (std::size_t eol; (eol = all.find('\n', at)) != std::string::npos; at = eol + 1) {
    const std::string_view line(all.data() + at, eol - at);
    const std::size_t tab = line.find('\t');
    if (tab == std::string_view::npos || tab == 0 || tab + 1 == line.size() ||
        line.find('\t', tab + 1) != std::string_view::npos)
      continue;  // not a record line: skipped, not fatal
    engines_[std::string(line.substr(0, tab))] = std::string(line.substr(tab + 1));
  }
}

std::optional<std::string> EngineChoiceRecord::find(const std::string& key) {
  const std::lock_guard lock(mutex_);
  load_once();
  const auto it = engines_.find(key);
  if (it == engines_.end()) return std::nullopt;
  return it->second;
}

void EngineChoiceRecord::remember(const std::string& key, const std::string& engine) {
  RT_CHECK(!key.empty() && key.find_first_of("\t\n") == std::string::npos && !engine.empty() &&
               engine.find_first_of("\t\n") == std::string::npos,
           "engine record: a key or engine name with a tab or newline: '{}' '{}'", key, engine);
  const std::lock_guard lock(mutex_);
  load_once();
  std::string& known = engines_[key];
  if (known == engine) return;
  known = engine;
  if (path_.empty()) return;
  // After an unfinished line, a tab and a newline first: the fragment ends
  // as a damaged line (two tabs, or none), never as a shortened engine name,
  // and this one is read back.
  const std::string line = (unfinished_tail_ ? "\t\n" : "") + key + '\t' + engine + '\n';
  std::error_code ec;
  const std::filesystem::path file(path_);
  if (file.has_parent_path()) std::filesystem::create_directories(file.parent_path(), ec);
  const int fd = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  bool written = false;
  int error = 0;
  if (fd >= 0) {
    const ssize_t n = ::write(fd, line.data(), line.size());
    error = errno;
    written = n == static_cast<ssize_t>(line.size());
    if (written) unfinished_tail_ = false;
    ::close(fd);
  } else {
    error = errno;
  }
  if (!written && !std::exchange(write_warned_, true))
    log_warn(
        "convolution engine choices are kept for this process only: cannot append to {} ({}); "
        "a later run may time and choose again (RINGTRAIN_CONV_CACHE names another file, off "
        "none)",
        path_, error != 0 ? std::strerror(error) : "short write");
}

std::string conv_engine_record_path(const char* conv_cache, const char* xdg_cache_home,
                                    const char* home) {
  if (conv_cache != nullptr) {
    const std::string_view v(conv_cache);
    return v == "off" ? std::string() : std::string(v);
  }
  if (xdg_cache_home != nullptr && *xdg_cache_home != '\0')
    return std::string(xdg_cache_home) + "/ringtrain/conv-engines.tsv";
  if (home != nullptr && *home != '\0')
    return std::string(home) + "/.cache/ringtrain/conv-engines.tsv";
  return {};
}

EngineChoiceRecord& conv_engine_record() {
  static EngineChoiceRecord record(conv_engine_record_path(
      std::getenv("RINGTRAIN_CONV_CACHE"), std::getenv("XDG_CACHE_HOME"), std::getenv("HOME")));
  return record;
}

bool conv_engine_timing_wanted() {
  static const bool wanted = [] {
    const char* env = std::getenv("RINGTRAIN_CONV_TUNE");
    const std::string v = env == nullptr || *env == '\0' ? "on" : env;
    RT_CHECK(v == "on" || v == "off", "RINGTRAIN_CONV_TUNE={}: expected on (the default) or off",
             v);
    return v == "on";
  }();
  return wanted;
}

std::optional<std::size_t> choose_by_time(std::span<const float> ms, float tie) {
  float fastest = -1;
  for (const float t : ms)
    if (t >= 0 && (fastest < 0 || t < fastest)) fastest = t;
  if (fastest < 0) return std::nullopt;
  for (std::size_t i = 0; i < ms.size(); ++i)
    if (ms[i] >= 0 && ms[i] <= fastest * (1 + tie)) return i;
  return std::nullopt;  // unreachable: the fastest itself qualifies
}

}  // namespace ringtrain::detail
