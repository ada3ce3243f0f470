#include "ringtrain/core/fatal.h"

#include <dlfcn.h>
#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "core/fatal_agreement.h"
#include "ringtrain/core/input_error.h"
#include "ringtrain/core/log.h"

namespace ringtrain {

namespace {
std::mutex& hooks_mutex() {
  static std::mutex m;
  return m;
}
std::vector<std::pair<AbortHookId, std::function<void()>>>& hooks() {
  static std::vector<std::pair<AbortHookId, std::function<void()>>> h;
  return h;
}
std::atomic<bool> g_in_fatal{false};
std::string g_fatal_message;  // written once, before the hooks run
std::atomic<std::thread::id> g_fatal_thread{};
std::atomic<bool> g_termination_signal{false};
std::mutex g_relay_mutex;
std::string g_relay, g_relay_origin;  // note_relayed_error
static_assert(std::atomic<bool>::is_always_lock_free, "set from a signal handler");

// Ranks that find the same bad input fail within milliseconds of each other,
// a slower node's read within a second or so; a rank that fails alone pays
// this wait once before the job ends. Only for bad input (exit 2), found while
// the job sets up: a runtime failure (a lost rank, a timeout) is often met
// while the launcher is already ending the job, and must be said at once.
constexpr double kAgreementSeconds = 2.0;
// Open MPI 4 (ORTE) has every rank that calls MPI_Abort send mpirun an
// 8-line "MPI_ABORT was invoked" box (with "N more processes have sent help
// message" lines after it), and mpirun, busy killing the ranks, sometimes
// garbles one into "ORTE_ERROR_LOG: Data unpack would read past end of buffer
// in file util/show_help.c". The fatal line above already names the rank and
// the cause. Open MPI's own switch for its help and error messages,
// orte_execute_quiet (mpirun -q), is set here in this process only, just
// before it aborts: mpirun's own messages (a rank killed by a signal, a launch
// failure) stay. It is not writable through MPI_T (not a settable variable),
// hence the symbol; other MPI libraries lack it, and then nothing changes.
void quiet_mpi_abort_banner() {
  if (void* quiet = ::dlsym(RTLD_DEFAULT, "orte_execute_quiet")) *static_cast<bool*>(quiet) = true;
}
}  // namespace

void note_termination_signal() noexcept {
  g_termination_signal.store(true);
}

void note_relayed_error(const std::string& relay, const std::string& origin) {
  std::lock_guard lock(g_relay_mutex);
  g_relay = relay;
  g_relay_origin = origin;
}

std::string fatal_message() {
  return g_in_fatal.load() ? g_fatal_message : std::string();
}

AbortHookId register_abort_hook(std::function<void()> hook) {
  static AbortHookId next = 1;
  std::lock_guard lock(hooks_mutex());
  hooks().emplace_back(next, std::move(hook));
  return next++;
}

void unregister_abort_hook(AbortHookId id) {
  std::lock_guard lock(hooks_mutex());
  auto& h = hooks();
  h.erase(std::remove_if(h.begin(), h.end(), [id](const auto& p) { return p.first == id; }),
          h.end());
}

void fatal(const std::string& message, int exit_code) {
  fatal_as("fatal", message, exit_code);
}

void fatal_as(const char* label, const std::string& message, int exit_code) {
  // A second fatal must not recurse or deadlock. From a hook of the first
  // (same thread) it is said and goes straight to the exit; from another
  // thread (the communication thread finding the same dead peer or timing
  // out too) it is the same failure seen twice, said already by the first,
  // and it only waits a while for the first to finish its hooks (the flight
  // recorder's verdict) and end the process.
  if (g_in_fatal.exchange(true)) {
    if (g_fatal_thread.load() != std::this_thread::get_id()) {
      std::this_thread::sleep_for(std::chrono::seconds(20));
      _exit(exit_code);
    }
    std::fprintf(stderr, "%s %s (while aborting): %s\n", rank_prefix().c_str(), label,
                 message.c_str());
    std::fflush(stderr);
    _exit(exit_code);
  }
  g_fatal_thread = std::this_thread::get_id();
  g_fatal_message = message;
  std::fflush(stdout);
  // After the launcher's SIGTERM, a runtime failure here is the job being
  // torn down for another rank's error: one message per job, that rank's.
  const bool torn_down = g_termination_signal.load() && exit_code != kInputErrorExitCode;
  std::string origin;
  {
    std::unique_lock lock(g_relay_mutex, std::try_to_lock);
    if (lock.owns_lock() && !g_relay.empty() && g_relay == message) origin = g_relay_origin;
  }
  const FatalAgreement agreed = torn_down ? FatalAgreement{}
                                : exit_code == kInputErrorExitCode
                                    ? agree_on_fatal(message, exit_code, kAgreementSeconds,
                                                     origin.empty() ? nullptr : &origin)
                                    : FatalAgreement{};
  if (torn_down) {
    // Said by the rank that ended the job.
  } else if (agreed.speaks) {
    std::string text = message;
    if (agreed.same_ranks.size() > 1) {
      // At the end of the first line, where the message itself ends (a hint may follow).
      const std::size_t eol = std::min(text.find('\n'), text.size());
      text.insert(eol, " [the same on " + describe_ranks(agreed.same_ranks, agreed.world) + "]");
    }
    std::fprintf(stderr, "%s %s: %s\n", rank_prefix().c_str(), label, text.c_str());
    std::fflush(stderr);
    tell_fatal_printed(agreed);
  } else if (!wait_fatal_printed(agreed, kAgreementSeconds)) {
    // The rank that was to say it did not: say it here.
    std::fprintf(stderr, "%s %s: %s\n", rank_prefix().c_str(), label, message.c_str());
  }
  std::fflush(stderr);

  std::vector<std::pair<AbortHookId, std::function<void()>>> to_run;
  {
    // try_lock: the failing thread may be the one holding it.
    std::unique_lock lock(hooks_mutex(), std::try_to_lock);
    if (lock.owns_lock()) to_run = hooks();
  }
  for (auto it = to_run.rbegin(); it != to_run.rend(); ++it) {
    try {
      it->second();
    } catch (...) {
      // Aborting goes on regardless: the job must end.
    }
  }

  int initialized = 0;
  int finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (initialized && !finalized) {
    // With one process there is no peer to release: MPI_Abort would only add
    // Open MPI's banner to the one line above (convert, eval, predict run so).
    int world = 0;
    if (MPI_Comm_size(MPI_COMM_WORLD, &world) != MPI_SUCCESS || world != 1) {
      quiet_mpi_abort_banner();
      MPI_Abort(MPI_COMM_WORLD, exit_code);
    }
  }
  _exit(exit_code);
}

}  // namespace ringtrain
