#include "ringtrain/core/check.h"

#include <cstring>

namespace ringtrain::detail {

namespace {
// Paths in messages are relative to the repository, so they read the same on
// every machine.
const char* short_path(const char* file) {
  for (const char* marker : {"/src/", "/kernels/", "/include/", "/tests/"}) {
    if (const char* p = std::strstr(file, marker)) return p + 1;
  }
  return file;
}
}  // namespace

void throw_check_failed(const char* file, int line, const std::string& message) {
  throw Error(message, fmt::format("{}:{}", short_path(file), line));
}

void throw_library_error(const char* library, const char* file, int line,
                         const std::string& library_message) {
  throw LibraryError(fmt::format("{} error: {}", library, library_message), library,
                     fmt::format("{}:{}", short_path(file), line));
}

}  // namespace ringtrain::detail
