#include "ops/conv_engine_record.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
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

namespace {

// How long a decision waits for another process's lock on the record (one
// timing a shape: seconds at most) before it says so, and before it decides
// unlocked: a stuck holder (a suspended run, a file system whose lock daemon
// stalls) must not hold every later run at model build without a word.
constexpr auto kLockNotice = std::chrono::seconds(10);
constexpr auto kLockGiveUp = std::chrono::seconds(120);

// The record's file, open for reading and appending, locked exclusively for
// one decision (released, and closed, by the destructor; a process that dies
// holding it releases it too).
class LockedFile {
 public:
  explicit LockedFile(const std::string& path) : path_(path) {
    std::error_code ec;
    const std::filesystem::path file(path);
    if (file.has_parent_path()) std::filesystem::create_directories(file.parent_path(), ec);
    // A file replaced while we waited (another process renamed a new one
    // over it) would be locked by us and not by them: lock again the file
    // the path names now.
    for (int attempt = 0; attempt < 3; ++attempt) {
      fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
      if (fd_ < 0) {
        error_ = errno;
        return;
      }
      if (!lock()) return;  // decided unlocked (said), on this file
      struct stat held {
      }, named{};
      if (::fstat(fd_, &held) == 0 && ::stat(path.c_str(), &named) == 0 &&
          held.st_dev == named.st_dev && held.st_ino == named.st_ino)
        return;
      ::close(std::exchange(fd_, -1));
    }
    log_warn(
        "convolution engine record {}: replaced by another process while locking it, three "
        "times; deciding without the lock",
        path);
    fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd_ < 0) error_ = errno;
  }
  ~LockedFile() {
    if (fd_ >= 0) ::close(fd_);  // releases the lock
  }
  LockedFile(const LockedFile&) = delete;
  LockedFile& operator=(const LockedFile&) = delete;

  bool open() const { return fd_ >= 0; }
  int error() const { return error_; }

  // The whole file as it is now.
  std::string read_all() const {
    std::string text;
    char buf[16384];
    for (off_t at = 0;;) {
      const ssize_t n = ::pread(fd_, buf, sizeof buf, at);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      text.append(buf, static_cast<std::size_t>(n));
      at += n;
    }
    return text;
  }
  // 0 when the whole line is written, else the error (EIO for a short write).
  int append(const std::string& line) const {
    const ssize_t n = ::write(fd_, line.data(), line.size());
    if (n == static_cast<ssize_t>(line.size())) return 0;
    return n < 0 ? errno : EIO;
  }

 private:
  // True when locked; false when the decision goes on unlocked (a file
  // system without locks, or a holder past kLockGiveUp), which is said.
  bool lock() {
    // After one give-up (a holder that does not let go), a decision tries
    // once and goes on: the wait is paid once a process, not per shape.
    static std::atomic<bool> gave_up{false};
    const auto start = std::chrono::steady_clock::now();
    bool noticed = false;
    for (;;) {
      if (::flock(fd_, LOCK_EX | LOCK_NB) == 0) {
        gave_up = false;
        return true;
      }
      const int e = errno;
      if (e == EINTR) continue;
      if (e == EWOULDBLOCK && gave_up) return false;
      if (e != EWOULDBLOCK) {
        static std::atomic<bool> said{false};
        if (said.exchange(true)) return false;
        log_warn(
            "convolution engine record {}: cannot lock it ({}); deciding without the lock, so "
            "ranks that reach a shape at once may time it each",
            path_, std::strerror(e));
        return false;
      }
      const auto waited = std::chrono::steady_clock::now() - start;
      if (waited > kLockGiveUp) {
        gave_up = true;
        log_warn(
            "convolution engine record {}: still locked by another process after {} s; "
            "deciding without the lock (and, while it stays locked, without waiting)",
            path_, std::chrono::duration_cast<std::chrono::seconds>(kLockGiveUp).count());
        return false;
      }
      if (!noticed && waited > kLockNotice) {
        noticed = true;
        log_info(
            "convolution engine record {}: waiting for another process (a rank or a run timing "
            "a convolution's engines) to release it",
            path_);
      }
      ::usleep(20000);
    }
  }

  std::string path_;
  int fd_ = -1;
  int error_ = 0;
};

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return {};
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace

EngineChoiceRecord::EngineChoiceRecord(std::string path) : path_(std::move(path)) {}

void EngineChoiceRecord::parse(const std::string& all) {
  unfinished_tail_ = !all.empty() && all.back() != '\n';
  // Complete lines only: a final fragment without its newline is a write that
  // did not finish. A later line of a key replaces an earlier one.
  std::size_t at = 0;
  for (std::size_t eol; (eol = all.find('\n', at)) != std::string::npos; at = eol + 1) {
    const std::string_view line(all.data() + at, eol - at);
    const std::size_t tab = line.find('\t');
    if (tab == std::string_view::npos || tab == 0 || tab + 1 == line.size() ||
        line.find('\t', tab + 1) != std::string_view::npos)
      continue;  // not a record line: skipped, not fatal
    std::string key(line.substr(0, tab));
    // A choice this process could not append stays this process's choice.
    if (unwritten_.count(key) == 0) engines_[std::move(key)] = std::string(line.substr(tab + 1));
  }
}

void EngineChoiceRecord::load_once() {
  if (loaded_) return;
  loaded_ = true;
  if (!path_.empty()) parse(read_file(path_));  // a missing file: the first run here
}

void EngineChoiceRecord::warn_once(const char* what, int error) {
  if (std::exchange(warned_, true)) return;
  log_warn(
      "convolution engine choices are kept for this process only: cannot {} {} ({}); a later "
      "run may time and choose again (RINGTRAIN_CONV_CACHE names another file, off none)",
      what, path_, error != 0 ? std::strerror(error) : "short write");
}

std::string EngineChoiceRecord::decide(
    const std::string& key,
    const std::function<std::string(const std::optional<std::string>& kept)>& choose) {
  RT_CHECK(!key.empty() && key.find_first_of("\t\n") == std::string::npos,
           "engine record: a key with a tab or newline: '{}'", key);
  const std::lock_guard lock(mutex_);
  std::optional<LockedFile> file;
  if (!path_.empty()) {
    file.emplace(path_);
    if (file->open()) {
      loaded_ = true;
      parse(file->read_all());  // what other processes appended since
    } else {
      warn_once("open", file->error());
      load_once();
    }
  }
  std::optional<std::string> kept;
  if (const auto it = engines_.find(key); it != engines_.end()) kept = it->second;
  const std::string chosen = choose(kept);
  if (chosen.empty() || chosen == kept) return chosen;
  RT_CHECK(chosen.find_first_of("\t\n") == std::string::npos,
           "engine record: an engine name with a tab or newline: '{}'", chosen);
  engines_[key] = chosen;
  if (!file || !file->open()) return chosen;
  // After an unfinished line, a tab and a newline first: the fragment ends
  // as a damaged line (two tabs, or none), never as a shortened engine name,
  // and this one is read back.
  const std::string line = (unfinished_tail_ ? "\t\n" : "") + key + '\t' + chosen + '\n';
  if (const int error = file->append(line); error == 0) {
    unfinished_tail_ = false;
  } else {
    unwritten_.insert(key);
    warn_once("append to", error);
  }
  return chosen;
}

std::optional<std::string> EngineChoiceRecord::find(const std::string& key) {
  const std::lock_guard lock(mutex_);
  load_once();
  const auto it = engines_.find(key);
  if (it == engines_.end()) return std::nullopt;
  return it->second;
}

void EngineChoiceRecord::remember(const std::string& key, const std::string& engine) {
  RT_CHECK(!engine.empty(), "engine record: an empty engine name for '{}'", key);
  decide(key, [&](const std::optional<std::string>&) { return engine; });
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

std::optional<std::size_t> choose_by_time(std::span<const float> ms,
                                          std::span<const std::size_t> workspace, float tie) {
  RT_CHECK(ms.size() == workspace.size(), "choose_by_time: {} times for {} workspaces", ms.size(),
           workspace.size());
  float fastest = -1;
  for (const float t : ms)
    if (t >= 0 && (fastest < 0 || t < fastest)) fastest = t;
  if (fastest < 0) return std::nullopt;
  std::optional<std::size_t> best;
  for (std::size_t i = 0; i < ms.size(); ++i)
    if (ms[i] >= 0 && ms[i] <= fastest * (1 + tie) && (!best || workspace[i] < workspace[*best]))
      best = i;
  return best;
}

std::optional<std::size_t> first_usable_untimed(std::size_t count,
                                                std::span<const std::string> wrong,
                                                std::span<const std::string> failed,
                                                const std::function<bool(std::size_t)>& sure) {
  for (std::size_t i = 0; i < count; ++i) {
    if (i < wrong.size() && !wrong[i].empty()) continue;
    if (i < failed.size() && !failed[i].empty()) continue;
    if (sure && !sure(i)) continue;
    return i;
  }
  return std::nullopt;
}

}  // namespace ringtrain::detail
