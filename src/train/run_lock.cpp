#include "ringtrain/train/run_lock.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <filesystem>

#include <fmt/format.h>

#include "ringtrain/core/check.h"
#include "ringtrain/core/log.h"
#include "ringtrain/core/timer.h"

namespace ringtrain {

namespace {

std::string this_host() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0 || buf[0] == '\0') return "unknown-host";
  return buf;
}

// The lock file's text: who holds it, for the next run's message.
std::string holder_text() {
  const std::time_t now = std::time(nullptr);
  char when[32] = {};
  std::strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  return fmt::format("host {} pid {} since {}\n", this_host(), static_cast<long>(::getpid()), when);
}

std::string read_all(int fd) {
  std::string text;
  char buf[512];
  ssize_t n = 0;
  off_t at = 0;
  while ((n = ::pread(fd, buf, sizeof buf, at)) > 0 && text.size() < 4096) {
    text.append(buf, static_cast<std::size_t>(n));
    at += n;
  }
  while (!text.empty() && (text.back() == '\n' || text.back() == '\0')) text.pop_back();
  return text;
}

bool write_all(int fd, const std::string& text) {
  if (::ftruncate(fd, 0) != 0) return false;
  std::size_t done = 0;
  while (done < text.size()) {
    const ssize_t n =
        ::pwrite(fd, text.data() + done, text.size() - done, static_cast<off_t>(done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<std::size_t>(n);
  }
  return ::fsync(fd) == 0 || errno == EINVAL;
}

}  // namespace

RunLock::RunLock(const std::vector<std::string>& flags, const std::vector<std::string>& dirs,
                 double wait_for_other_host_s) {
  namespace fs = std::filesystem;
  RT_CHECK(flags.size() == dirs.size(), "internal: run lock: {} flags for {} directories",
           flags.size(), dirs.size());
  try {
    std::vector<fs::path> seen;
    for (std::size_t i = 0; i < dirs.size(); ++i) {
      if (dirs[i].empty()) continue;
      std::error_code ec;
      const fs::path canonical = fs::weakly_canonical(dirs[i], ec);
      const fs::path key = ec ? fs::path(dirs[i]) : canonical;
      if (std::find(seen.begin(), seen.end(), key) != seen.end())
        continue;  // --logdir = --ckpt-dir
      seen.push_back(key);
      lock_directory(flags[i], dirs[i], wait_for_other_host_s);
    }
  } catch (...) {
    release();  // the locks taken so far
    throw;
  }
}

void RunLock::lock_directory(const std::string& flag, const std::string& dir,
                             double wait_for_other_host_s) {
  const std::string path = (std::filesystem::path(dir) / kFileName).string();
  const double started = monotonic_seconds();
  bool told_waiting = false;
  // The file may be replaced between open and lock (a finishing holder
  // removes it): the lock counts only on the file that is still there.
  for (int attempt = 0;; ++attempt) {
    const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    RT_CHECK(fd >= 0, "{} {}: cannot create the run lock {}: {}", flag, dir, path,
             std::strerror(errno));
    struct flock lock {};
    lock.l_type = F_WRLCK;
    lock.l_whence = SEEK_SET;
    if (::fcntl(fd, F_SETLK, &lock) != 0) {
      const int err = errno;
      const std::string holder = read_all(fd);
      ::close(fd);
      RT_CHECK(err == EACCES || err == EAGAIN, "{} {}: cannot lock {}: {}", flag, dir, path,
               std::strerror(err));
      // A holder on another host may be a lost node whose lock the file
      // server has not yet released (an NFS lease): a restarted job waits.
      const bool elsewhere =
          !holder.empty() && holder.rfind(fmt::format("host {} ", this_host()), 0) != 0;
      if (elsewhere && monotonic_seconds() - started < wait_for_other_host_s) {
        if (!told_waiting)
          log_info("{} {}: waiting up to {:g} s for the run lock of {}", flag, dir,
                   wait_for_other_host_s, holder);
        told_waiting = true;
        attempt = 0;
        ::usleep(500 * 1000);
        continue;
      }
      throw Error(fmt::format(
          "{} {} is in use by another run ({}): two runs there would interleave metrics.jsonl "
          "and overwrite each other's checkpoints; wait for it to end, or choose another "
          "directory",
          flag, dir, holder.empty() ? "its holder is starting" : holder));
    }
    struct stat by_fd {};
    struct stat by_path {};
    if (::fstat(fd, &by_fd) != 0 || ::stat(path.c_str(), &by_path) != 0 ||
        by_fd.st_ino != by_path.st_ino || by_fd.st_dev != by_path.st_dev) {
      ::close(fd);
      RT_CHECK(attempt < 10, "{} {}: the run lock {} keeps changing", flag, dir, path);
      continue;
    }
    // Text with nobody's lock on it: a run that died without removing it.
    if (const std::string stale = read_all(fd); !stale.empty())
      log_info("{} {}: taking over the run lock of a run that is no longer running ({})", flag, dir,
               stale);
    if (!write_all(fd, holder_text())) {
      const int err = errno;
      ::close(fd);
      RT_CHECK(false, "{} {}: cannot write the run lock {}: {}", flag, dir, path,
               std::strerror(err));
    }
    held_.push_back({path, fd});
    return;
  }
}

RunLock::~RunLock() {
  release();
}

void RunLock::release() {
  // Removed while still locked, so that no other run can lock this file in
  // between and then lose it.
  for (Held& h : held_) {
    ::unlink(h.path.c_str());
    ::close(h.fd);
  }
  held_.clear();
}

}  // namespace ringtrain
