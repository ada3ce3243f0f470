#include "ringtrain/core/writable_path.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include <fmt/format.h>

#include "ringtrain/core/check.h"

namespace ringtrain {

namespace fs = std::filesystem;

void ensure_writable_directory(const std::string& flag, const std::string& dir) {
  RT_CHECK(!dir.empty(), "{}: the path is empty", flag);
  std::error_code ec;
  const fs::path path(dir);
  if (!fs::exists(path, ec)) {
    fs::create_directories(path, ec);
    RT_CHECK(!ec, "{} {}: cannot create the directory: {}", flag, dir, ec.message());
  }
  RT_CHECK(fs::is_directory(path, ec), "{} {}: exists and is not a directory", flag, dir);
  // A probe file, not access(2): it also catches read-only mounts, quotas of
  // zero inodes and ACLs, and it is what the real write will do.
  const std::string probe =
      (path / fmt::format(".ringtrain-write-probe-{}", static_cast<long>(::getpid()))).string();
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  RT_CHECK(fd >= 0, "{} {}: cannot write in this directory: {}", flag, dir, std::strerror(errno));
  ::close(fd);
  ::unlink(probe.c_str());
}

void ensure_writable_file(const std::string& flag, const std::string& file) {
  RT_CHECK(!file.empty(), "{}: the path is empty", flag);
  const fs::path path(file);
  std::error_code ec;
  if (fs::exists(path, ec)) {
    RT_CHECK(fs::is_regular_file(path, ec), "{} {}: exists and is not a regular file", flag, file);
    const int fd = ::open(file.c_str(), O_WRONLY);
    RT_CHECK(fd >= 0, "{} {}: cannot be opened for writing: {}", flag, file, std::strerror(errno));
    ::close(fd);
  }
  const fs::path parent = path.has_parent_path() ? path.parent_path() : fs::path(".");
  ensure_writable_directory(fmt::format("{} {}: the directory", flag, file), parent.string());
}

}  // namespace ringtrain
