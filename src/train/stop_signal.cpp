#include "ringtrain/train/stop_signal.h"

#include <unistd.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include <fmt/format.h>

#include "ringtrain/core/check.h"
#include "ringtrain/core/fatal.h"
#include "ringtrain/core/log.h"

namespace ringtrain {

namespace {

// Everything the handler touches: a lock-free atomic and pre-built messages
// (formatting is not async-signal-safe).
std::atomic<int> g_signal{0};
std::atomic<bool> g_installed{false};
static_assert(std::atomic<int>::is_always_lock_free, "the stop flag must be async-signal-safe");

constexpr std::size_t kMessageSize = 256;
char g_first_message[NSIG][kMessageSize];  // per signal, naming it
std::size_t g_first_length[NSIG] = {};
char g_again_message[kMessageSize];
std::size_t g_again_length = 0;

void build_message(char* out, std::size_t& length, const std::string& text) {
  length = std::min(text.size(), kMessageSize);
  std::memcpy(out, text.data(), length);
}

// Open MPI's mpirun (4.x, ORTE) ends a job (on Ctrl-C or SIGTERM to mpirun,
// or after a rank's failure) by sending every rank SIGCONT, then SIGTERM
// odls_base_sigkill_timeout (1 s) later, then SIGKILL 1 s after that, and it
// reads none of the ranks' output in between (it sleeps in that loop). A rank
// that waited for the SIGTERM had 1 s, and one that logs every step filled
// its output pipe meanwhile and sat blocked in write() until the SIGKILL: no
// checkpoint, no summary. So under Open MPI a SIGCONT sent by the rank's
// parent (mpirun, or orted on another node) is the stop request, 1 s earlier;
// a SIGCONT from anyone else (a resume after SIGSTOP) is not.
bool announces_job_end(int sig, const siginfo_t* info) {
  return sig == SIGCONT && info != nullptr && info->si_code == SI_USER &&
         info->si_pid == ::getppid();
}

extern "C" void on_stop_signal(int sig, siginfo_t* info, void* /*context*/) {
  const int saved_errno = errno;
  if (sig == SIGCONT && !announces_job_end(sig, info)) {
    errno = saved_errno;
    return;
  }
  int expected = 0;
  // SIGTERM is also how mpirun ends every rank after one rank's fatal error,
  // and SIGCONT announces it: said at once, it would follow that error on
  // every surviving rank as if the job were stopping cleanly. The training
  // loop says it instead, once, when the ranks agree to stop ("stop
  // requested (SIGTERM)"). Only the SIGTERM marks a failure that follows as
  // the teardown: in the second before it, a rank that finds a peer dead
  // (kill -9, the OOM killer: nobody has said it) still says so.
  const bool quiet = sig == SIGTERM || sig == SIGCONT;
  if (sig == SIGTERM) note_termination_signal();
  if (g_signal.compare_exchange_strong(expected, sig)) {
    // Async-signal-safe: write(2) of a prepared buffer. The result is ignored
    // on purpose: nothing can be done about a closed stderr here.
    if (!quiet) {
      [[maybe_unused]] auto n = ::write(STDERR_FILENO, g_first_message[sig], g_first_length[sig]);
    }
  } else if (sig == SIGINT) {
    [[maybe_unused]] auto n = ::write(STDERR_FILENO, g_again_message, g_again_length);
    std::signal(SIGINT, SIG_DFL);
    std::raise(SIGINT);
  }
  errno = saved_errno;
}

// A rank that Open MPI's mpirun started (ORTE marks its children's
// environment), unless mpirun forwards job control: then a SIGCONT from it is
// the user's "fg" after Ctrl-Z, not the end of the job.
bool started_by_open_mpi() {
  if (std::getenv("OMPI_MCA_orte_launch") == nullptr) return false;
  const char* forward = std::getenv("OMPI_MCA_orte_forward_job_control");
  if (forward == nullptr) return true;
  const std::string_view v(forward);
  return v.empty() || v == "0" || v == "false" || v == "no";
}

}  // namespace

std::vector<int> default_stop_signals() {
  std::vector<int> signals = {SIGINT, SIGTERM, SIGUSR1};
  if (started_by_open_mpi()) signals.push_back(SIGCONT);
  return signals;
}

void stop_when_launcher_dies(pid_t launcher_parent) {
#ifdef __linux__
  if (std::getenv("OMPI_COMM_WORLD_RANK") == nullptr && std::getenv("PMI_RANK") == nullptr) return;
  if (::prctl(PR_SET_PDEATHSIG, SIGTERM) != 0) {
    log_warn("cannot ask to be stopped when mpirun dies (prctl PR_SET_PDEATHSIG): {}",
             std::strerror(errno));
    return;
  }
  // The parent may have died before the request: then no signal will come,
  // and this process was already handed to init or a subreaper.
  if (::getppid() != launcher_parent) ::kill(::getpid(), SIGTERM);
#else
  (void)launcher_parent;
#endif
}

std::string stop_reason(int signal_number) {
  if (signal_number == SIGCONT) return "SIGCONT: mpirun is ending the job";
  return signal_name(signal_number);
}

std::string signal_name(int signal_number) {
  switch (signal_number) {
    case SIGINT:
      return "SIGINT";
    case SIGTERM:
      return "SIGTERM";
    case SIGHUP:
      return "SIGHUP";
    case SIGUSR1:
      return "SIGUSR1";
    case SIGUSR2:
      return "SIGUSR2";
    case SIGQUIT:
      return "SIGQUIT";
    case SIGCONT:
      return "SIGCONT";
    default:
      return fmt::format("signal {}", signal_number);
  }
}

StopSignalHandler::StopSignalHandler(std::vector<int> signals) : signals_(std::move(signals)) {
  RT_CHECK(!signals_.empty(), "stop signals: no signals given");
  for (int sig : signals_)
    RT_CHECK(sig > 0 && sig < NSIG && sig != SIGKILL && sig != SIGSTOP,
             "stop signals: cannot handle {}", signal_name(sig));
  RT_CHECK(!g_installed.exchange(true), "stop signals: a handler is already installed");

  for (int sig : signals_)
    build_message(
        g_first_message[sig], g_first_length[sig],
        fmt::format("{} {} received: stopping after the current step{}\n", rank_prefix(),
                    signal_name(sig), sig == SIGINT ? " (Ctrl-C again to abort at once)" : ""));
  build_message(g_again_message, g_again_length,
                fmt::format("{} second SIGINT: aborting now\n", rank_prefix()));
  g_signal.store(0);

  struct sigaction action {};
  action.sa_sigaction = on_stop_signal;
  sigemptyset(&action.sa_mask);
  for (int sig : signals_) sigaddset(&action.sa_mask, sig);
  // Interrupted system calls resume: MPI and file I/O never see EINTR.
  action.sa_flags = SA_RESTART | SA_SIGINFO;
  previous_.resize(signals_.size());
  for (std::size_t i = 0; i < signals_.size(); ++i) {
    if (::sigaction(signals_[i], &action, &previous_[i]) != 0) {
      const int err = errno;
      for (std::size_t j = 0; j < i; ++j) ::sigaction(signals_[j], &previous_[j], nullptr);
      g_installed.store(false);
      RT_CHECK(false, "stop signals: cannot install a handler for {}: {}", signal_name(signals_[i]),
               std::strerror(err));
    }
  }
}

StopSignalHandler::~StopSignalHandler() {
  for (std::size_t i = 0; i < signals_.size(); ++i)
    ::sigaction(signals_[i], &previous_[i], nullptr);
  g_installed.store(false);
}

bool StopSignalHandler::stop_requested() const {
  return g_signal.load() != 0;
}
int StopSignalHandler::signal_number() const {
  return g_signal.load();
}
void StopSignalHandler::clear() {
  g_signal.store(0);
}

bool stop_requested() {
  return g_signal.load() != 0;
}
bool stop_handler_installed() {
  return g_installed.load();
}
int stop_signal_number() {
  return g_signal.load();
}

}  // namespace ringtrain
