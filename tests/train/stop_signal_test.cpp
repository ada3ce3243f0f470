// Stop signals: raising SIGTERM/SIGINT/SIGUSR1 sets the flag and nothing else, the
// previous handlers come back afterwards, a second SIGINT kills at once, a
// SIGTERM from another process stops a polling loop, and in a rank that Open
// MPI's mpirun started, a SIGCONT from the parent (mpirun ending the job) is a
// stop request while any other SIGCONT is not.
#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <thread>

#include "ringtrain/core/error.h"
#include "ringtrain/train/stop_signal.h"

using namespace ringtrain;

namespace {

volatile sig_atomic_t g_test_handler_hits = 0;
extern "C" void test_handler(int) {
  g_test_handler_hits = g_test_handler_hits + 1;
}

void (*current_handler(int sig))(int) {
  struct sigaction now {};
  sigaction(sig, nullptr, &now);
  return now.sa_handler;
}

// Runs `body` in a child process and returns its wait status.
int in_child(const std::function<int()>& body) {
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) ::_exit(body());
  int status = 0;
  ::waitpid(pid, &status, 0);
  return status;
}

}  // namespace

TEST_CASE("raising SIGTERM, SIGINT or SIGUSR1 sets the flag and the process carries on") {
  StopSignalHandler stop;
  CHECK_FALSE(stop.stop_requested());
  CHECK_FALSE(stop_requested());
  CHECK(stop.signal_number() == 0);

  std::raise(SIGTERM);
  CHECK(stop.stop_requested());
  CHECK(stop_requested());
  CHECK(stop.signal_number() == SIGTERM);
  CHECK(stop_signal_number() == SIGTERM);
  std::raise(SIGTERM);  // a repeated SIGTERM changes nothing
  CHECK(stop.signal_number() == SIGTERM);

  stop.clear();
  CHECK_FALSE(stop_requested());
  std::raise(SIGINT);  // the first SIGINT is a request too
  CHECK(stop.signal_number() == SIGINT);
  stop.clear();
  std::raise(SIGUSR1);  // what launch/ringtrain-mpirun sends for SIGTERM
  CHECK(stop.signal_number() == SIGUSR1);
  stop.clear();
}

TEST_CASE("the previous handlers come back when the stop handler goes") {
  // (The test framework has its own SIGTERM/SIGINT handlers: those must return.)
  const auto term_before = current_handler(SIGTERM);
  const auto int_before = current_handler(SIGINT);
  {
    StopSignalHandler stop;
    CHECK(current_handler(SIGTERM) != term_before);
    CHECK(current_handler(SIGINT) != int_before);
    // Only one may be active.
    CHECK_THROWS_WITH(StopSignalHandler(), Catch::Contains("already installed"));
  }
  CHECK(current_handler(SIGTERM) == term_before);
  CHECK(current_handler(SIGINT) == int_before);

  struct sigaction mine {
  }, before{};
  mine.sa_handler = test_handler;
  sigemptyset(&mine.sa_mask);
  REQUIRE(sigaction(SIGUSR1, &mine, &before) == 0);
  {
    StopSignalHandler stop({SIGUSR1});
    std::raise(SIGUSR1);
    CHECK(stop.signal_number() == SIGUSR1);
    CHECK(g_test_handler_hits == 0);
    stop.clear();
  }
  std::raise(SIGUSR1);
  CHECK(g_test_handler_hits == 1);
  sigaction(SIGUSR1, &before, nullptr);

  CHECK_THROWS_AS(StopSignalHandler({SIGKILL}), Error);
  CHECK_THROWS_AS(StopSignalHandler(std::vector<int>{}), Error);
  // A failed construction leaves nothing installed: a new one works.
  StopSignalHandler again;
  CHECK_FALSE(again.stop_requested());
}

TEST_CASE("a second SIGINT ends the process at once") {
  const int status = in_child([] {
    StopSignalHandler stop;
    std::raise(SIGINT);
    if (!stop_requested()) return 41;
    std::raise(SIGINT);
    return 42;  // not reached
  });
  REQUIRE(WIFSIGNALED(status));
  CHECK(WTERMSIG(status) == SIGINT);
}

TEST_CASE("SIGTERM from another process stops a polling loop") {
  int ready[2];
  REQUIRE(::pipe(ready) == 0);
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    ::close(ready[0]);
    StopSignalHandler stop;
    [[maybe_unused]] auto n = ::write(ready[1], "r", 1);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (!stop.stop_requested()) {  // the training loop, polling at step boundaries
      if (std::chrono::steady_clock::now() > deadline) ::_exit(40);
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    ::_exit(stop.signal_number() == SIGTERM ? 7 : 41);
  }
  ::close(ready[1]);
  char c = 0;
  REQUIRE(::read(ready[0], &c, 1) == 1);
  ::close(ready[0]);
  ::kill(pid, SIGTERM);
  int status = 0;
  ::waitpid(pid, &status, 0);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 7);
}

TEST_CASE("under Open MPI, a SIGCONT from the parent is a stop request, any other is not") {
  // The child plays the rank, this process its mpirun: ORTE marks the
  // environment of the processes it starts with OMPI_MCA_orte_launch.
  int ready[2], resumed[2];
  REQUIRE(::pipe(ready) == 0);
  REQUIRE(::pipe(resumed) == 0);
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    ::close(ready[0]);
    ::close(resumed[1]);
    ::setenv("OMPI_MCA_orte_launch", "1", 1);
    StopSignalHandler stop;
    std::raise(SIGCONT);  // from itself: a resume, not the end of the job
    if (stop.stop_requested()) ::_exit(41);
    [[maybe_unused]] auto n = ::write(ready[1], "r", 1);
    char c = 0;
    if (::read(resumed[0], &c, 1) != 1) ::_exit(42);
    ::_exit(stop.signal_number() == SIGCONT ? 7 : 43);
  }
  ::close(ready[1]);
  ::close(resumed[0]);
  char c = 0;
  REQUIRE(::read(ready[0], &c, 1) == 1);
  ::close(ready[0]);
  // The signal is pending when kill() returns, so the child handles it before
  // its read() of the byte returns.
  REQUIRE(::kill(pid, SIGCONT) == 0);
  REQUIRE(::write(resumed[1], "g", 1) == 1);
  ::close(resumed[1]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 7);
  CHECK(stop_reason(SIGCONT) == "SIGCONT: mpirun is ending the job");
  CHECK(stop_reason(SIGTERM) == "SIGTERM");
}

TEST_CASE("outside Open MPI, or when mpirun forwards job control, SIGCONT is left alone") {
  const auto status = in_child([] {
    ::unsetenv("OMPI_MCA_orte_launch");
    {
      StopSignalHandler stop;
      if (current_handler(SIGCONT) != SIG_DFL) return 41;
    }
    ::setenv("OMPI_MCA_orte_launch", "1", 1);
    ::setenv("OMPI_MCA_orte_forward_job_control", "1", 1);
    {
      StopSignalHandler stop;
      if (current_handler(SIGCONT) != SIG_DFL) return 42;
    }
    ::setenv("OMPI_MCA_orte_forward_job_control", "0", 1);
    StopSignalHandler stop;
    return current_handler(SIGCONT) != SIG_DFL ? 7 : 43;
  });
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 7);
}

TEST_CASE("signal names") {
  CHECK(signal_name(SIGTERM) == "SIGTERM");
  CHECK(signal_name(SIGINT) == "SIGINT");
  CHECK(signal_name(SIGUSR1) == "SIGUSR1");
  CHECK(signal_name(64) == "signal 64");
}
