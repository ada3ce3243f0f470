#include "ringtrain/data/output_guard.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "ringtrain/core/check.h"
#include "ringtrain/core/temp_file_guard.h"

namespace ringtrain {

namespace fs = std::filesystem;

namespace {
// The same file by identity where both exist (hard links, symlinks, ./a and
// a), else by the normalised absolute path.
bool same_file(const fs::path& a, const fs::path& b) {
  std::error_code ec;
  if (fs::exists(a, ec) && fs::exists(b, ec)) {
    const bool same = fs::equivalent(a, b, ec);
    if (!ec) return same;
  }
  return fs::absolute(a, ec).lexically_normal() == fs::absolute(b, ec).lexically_normal();
}
}  // namespace

void guard_output(const std::string& output, const std::vector<GuardedInput>& inputs, bool force,
                  const std::string& output_flag) {
  RT_CHECK(!output.empty(), "{}: an output file is required", output_flag);
  const fs::path out(output);
  for (const GuardedInput& in : inputs) {
    if (in.path.empty()) continue;
    RT_CHECK(!same_file(out, in.path),
             "{} {} is also the input {} {}: writing it would destroy the input (even with "
             "--force); choose another output",
             output_flag, output, in.flag, in.path);
  }
  std::error_code ec;
  const fs::file_status status = fs::status(out, ec);
  RT_CHECK(!fs::is_directory(status), "{} {} is a directory: give a file name", output_flag,
           output);
  RT_CHECK(force || !fs::exists(status),
           "{} {} already exists: pass --force to replace it, or choose another output",
           output_flag, output);
}

void guard_output_directory(const std::string& dir, bool force, const std::string& flag) {
  RT_CHECK(!dir.empty(), "{}: a directory is required", flag);
  std::error_code ec;
  const fs::file_status status = fs::status(dir, ec);
  if (!fs::exists(status)) return;
  RT_CHECK(fs::is_directory(status), "{} {} is not a directory", flag, dir);
  std::size_t entries = 0;
  for (auto it = fs::directory_iterator(dir, ec); !ec && it != fs::directory_iterator();
       it.increment(ec))
    ++entries;
  RT_CHECK(force || entries == 0,
           "{} {} already holds {} file(s), which would mix with this run's: pass --force to "
           "write into it, or choose another directory",
           flag, dir, entries);
}

void write_output_text(const std::string& output, const std::string& text,
                       const std::string& output_flag) {
  const std::string tmp = fmt::format("{}.tmp-{}", output, static_cast<long>(::getpid()));
  TempFileGuard guard(tmp);
  // stdio rather than a stream: a failed write or close leaves errno, so a
  // full disk is said as "No space left on device", not a bare "write failed".
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  RT_CHECK(f != nullptr, "{} {}: cannot open {} for writing: {}", output_flag, output, tmp,
           std::strerror(errno));
  const bool written = std::fwrite(text.data(), 1, text.size(), f) == text.size();
  int err = written ? 0 : errno;
  if (std::fclose(f) != 0 && err == 0) err = errno;
  std::error_code ec;
  if (!written || err != 0) fs::remove(tmp, ec);
  RT_CHECK(written && err == 0, "{} {}: write failed: {}", output_flag, output,
           std::strerror(err != 0 ? err : EIO));
  fs::rename(tmp, output, ec);
  if (!ec) return;
  const std::string why = ec.message();
  fs::remove(tmp, ec);
  throw Error(fmt::format("{} {}: cannot rename {} to it: {}", output_flag, output, tmp, why));
}

}  // namespace ringtrain
