// Clean stops: SIGINT, SIGTERM (what Slurm sends at the time limit, and what
// mpirun sends the ranks on Ctrl-C) and SIGUSR1 only set a flag; the training loop
// polls it at step boundaries, writes a final checkpoint and exits non-zero. A
// second SIGINT (an impatient Ctrl-C) ends the process at once.
//
// A signal may reach only some ranks, so the trainer must agree on the flag
// across ranks (an all-reduce of max at the step boundary) before acting on
// it; otherwise the ranks that stop would leave the others in a collective.
//
// Why SIGUSR1: Open MPI's mpirun answers SIGTERM (and Ctrl-C) by sending the
// ranks SIGCONT, SIGTERM 1 s later and SIGKILL 1 s after that
// (odls_base_sigkill_timeout), too soon for a checkpoint of a large model, but
// forwards SIGUSR1 and does nothing else. launch/ringtrain-mpirun
// therefore turns a SIGTERM it receives into SIGUSR1 for the ranks, with a
// grace period before the real SIGTERM; `sbatch --signal=B:USR1@120` does the
// same under Slurm. Under a bare mpirun, its SIGCONT from the rank's parent
// is taken as the stop request (see stop_signal.cpp), which gives the ranks
// the whole 2 s.
#pragma once

#include <sys/types.h>

#include <csignal>
#include <string>
#include <vector>

namespace ringtrain {

// What a training job stopped by one of these signals exits with. 143 means
// "stopped, and the state is saved": a final checkpoint was written, so a
// requeued job continues with --resume latest. Without --ckpt-dir nothing is
// saved, and a script that requeues on 143 would start over for ever: such a
// stop exits 130 instead (the shell's code for an interrupted command).
inline constexpr int kStoppedWithCheckpointExitCode = 143;
inline constexpr int kStoppedUnsavedExitCode = 130;

// SIGINT, SIGTERM and SIGUSR1; and SIGCONT in a rank that Open MPI's mpirun
// started, where a SIGCONT from the rank's parent announces the end of the
// job (a SIGCONT from anyone else is ignored).
std::vector<int> default_stop_signals();

class StopSignalHandler {
 public:
  // Installs the handler for `signals`. Only one handler may be active at a
  // time (Error otherwise). The flag starts cleared.
  explicit StopSignalHandler(std::vector<int> signals = default_stop_signals());
  // Restores the dispositions that were in place before.
  ~StopSignalHandler();
  StopSignalHandler(const StopSignalHandler&) = delete;
  StopSignalHandler& operator=(const StopSignalHandler&) = delete;

  bool stop_requested() const;
  // The first signal received, 0 if none.
  int signal_number() const;
  void clear();

 private:
  std::vector<int> signals_;
  std::vector<struct sigaction> previous_;
};

// The same flag, for code that has no handle on the handler object.
bool stop_requested();
// Whether a StopSignalHandler is active (one may be installed before MPI
// starts, so that a signal during start-up is not fatal).
bool stop_handler_installed();
int stop_signal_number();

// In a rank that mpirun started (Open MPI, or MPICH's hydra), asks the kernel
// to send this process SIGTERM when its parent (mpirun, orted, the hydra
// proxy) dies: mpirun can exit before signalling the ranks (two Ctrl-Cs close
// together; kill -9), and the ranks would run on with nobody to stop them.
// The SIGTERM then takes the usual path (a checkpoint when --ckpt-dir is
// given, exit 143). launcher_parent: getppid() as early as the process could
// read it; a parent that is already gone by now gets the SIGTERM at once.
// Linux only; elsewhere nothing.
void stop_when_launcher_dies(pid_t launcher_parent);

// "SIGTERM", "SIGINT", or "signal N".
std::string signal_name(int signal_number);
// What a stop message says: the signal's name, and for SIGCONT who sent it
// ("SIGCONT: mpirun is ending the job").
std::string stop_reason(int signal_number);

}  // namespace ringtrain
