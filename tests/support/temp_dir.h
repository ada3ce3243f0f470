// A scratch directory under the system temp dir, unique per test process and
// removed with everything in it when the test ends.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <string>
#include <system_error>

namespace ringtrain::test {

class TempDir {
 public:
  // `create` false leaves the path absent, for tests of code that makes it.
  explicit TempDir(const std::string& tag, bool create = true)
      : path(std::filesystem::temp_directory_path() /
             ("ringtrain-" + tag + "-" + std::to_string(::getpid()))) {
    std::filesystem::remove_all(path);
    if (create) std::filesystem::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  std::string str() const { return path.string(); }

  const std::filesystem::path path;
};

}  // namespace ringtrain::test
