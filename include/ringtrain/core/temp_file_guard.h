// A file being written under a temporary name is removed if the process is
// interrupted (SIGINT, SIGTERM, SIGHUP) before it is renamed into place, so a
// Ctrl-C during a conversion leaves neither a half-written output nor its
// temporary. Only where those signals still have their default action: a
// process with its own handlers (train's clean stop) keeps them.
#pragma once

#include <string>

namespace ringtrain {

class TempFileGuard {
 public:
  explicit TempFileGuard(const std::string& path);
  // Stops guarding (the file was renamed, or removed by its writer).
  ~TempFileGuard();
  TempFileGuard(const TempFileGuard&) = delete;
  TempFileGuard& operator=(const TempFileGuard&) = delete;

 private:
  int slot_ = -1;  // -1: not guarded (too many at once, or the path too long)
};

}  // namespace ringtrain
