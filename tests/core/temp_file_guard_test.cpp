// A temporary being written is removed when a signal ends the process, and
// only while it is guarded; a handler someone else installed is left alone.
#include <catch2/catch.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <filesystem>
#include <string>

#include "ringtrain/core/temp_file_guard.h"

using namespace ringtrain;
namespace fs = std::filesystem;

namespace {

std::string scratch(const char* name) {
  const fs::path dir =
      fs::temp_directory_path() / ("temp-file-guard-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  return (dir / name).string();
}

void write(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "w");
  REQUIRE(f != nullptr);
  std::fputs("half written", f);
  std::fclose(f);
}

// Runs body in a child with the default signal actions (the test framework
// has its own handlers); returns the child's wait status.
template <typename F>
int in_child(F body) {
  const pid_t child = ::fork();
  if (child == 0) {
    for (int sig : {SIGINT, SIGTERM, SIGHUP}) std::signal(sig, SIG_DFL);
    body();
    ::_exit(0);
  }
  int status = 0;
  ::waitpid(child, &status, 0);
  return status;
}

}  // namespace

TEST_CASE("a signal removes a guarded temporary and still ends the process") {
  for (int sig : {SIGINT, SIGTERM}) {
    const std::string path = scratch("out.h5.tmp-1");
    const int status = in_child([&] {
      TempFileGuard guard(path);
      write(path);
      std::raise(sig);
    });
    CHECK(WIFSIGNALED(status));
    CHECK(WTERMSIG(status) == sig);
    CHECK_FALSE(fs::exists(path));
  }
}

TEST_CASE("a file outlives its guard, and another handler is kept") {
  const std::string renamed = scratch("renamed.h5");
  int status = in_child([&] {
    { TempFileGuard guard(renamed); }
    write(renamed);
    std::raise(SIGINT);
  });
  CHECK(WIFSIGNALED(status));
  CHECK(fs::exists(renamed));

  const std::string kept = scratch("kept.h5.tmp-2");
  status = in_child([&] {
    std::signal(SIGTERM, [](int) { ::_exit(42); });
    TempFileGuard guard(kept);
    write(kept);
    std::raise(SIGTERM);
  });
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 42);
  CHECK(fs::exists(kept));
  fs::remove_all(fs::path(kept).parent_path());
}
