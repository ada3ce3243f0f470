// The ringtrain command. Parses flags before MPI starts (so --help and flag
// errors are instant), then runs the chosen subcommand under the failure
// policy: any ringtrain::Error on any rank becomes fatal(), which ends the job.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

#include "apps/command.h"
#include "ringtrain/config.h"
#include "ringtrain/core/error.h"
#include "ringtrain/core/fatal.h"
#include "ringtrain/core/input_error.h"
#include "ringtrain/core/log.h"
#include "ringtrain/launch/topology.h"
#include "ringtrain/train/stop_signal.h"

#include <optional>

namespace {

// A bad flag ends the command with exit 2 before MPI starts (so the answer is
// instant). Under a launcher with several ranks, every rank usually has the
// same bad flag: MPI starts after all, so that the ranks that agree print the
// message once.
int refuse_flags(const std::string& message, int argc, char** argv) {
  using namespace ringtrain;
  if (log_identity().world > 1) {
    try {
      MpiSession mpi(&argc, &argv);
      fatal_as("error", message, kInputErrorExitCode);
    } catch (const std::exception&) {
      // MPI did not start: say it on this rank, as for one process.
    }
  }
  std::fprintf(stderr, "%s error: %s\n", rank_prefix().c_str(), message.c_str());
  return kInputErrorExitCode;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace ringtrain;
  // Before anything slow: see stop_when_launcher_dies().
  const pid_t launcher_parent = ::getppid();
  // Until MPI starts, messages (a bad flag, a signal) name the launcher's rank.
  set_log_identity_from_launcher();
  CLI::App app{
      "ringtrain: synchronous data-parallel training with ring all-reduce.\n"
      "Launch one rank per GPU (or per CPU core) with mpirun, e.g.\n"
      "  mpirun -np 4 --machinefile hosts ringtrain train --data fashion.h5 --model cnn\n"};
  app.require_subcommand(1);
  app.set_version_flag("--version", RINGTRAIN_VERSION_STRING);
  apps::CommandContext ctx;
  apps::build_commands(app, ctx);
  apps::refuse_negative_counts(app);

  try {
    app.parse(argc, argv);
  } catch (const CLI::Success& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    if (const std::string typo = apps::command_line_typo(app, argc, argv); !typo.empty())
      return refuse_flags(typo, argc, argv);
    return refuse_flags(
        fmt::format(
            "{}\nRun 'ringtrain {}--help' for the flags.", e.what(),
            app.get_subcommands().empty() ? "" : app.get_subcommands().front()->get_name() + " "),
        argc, argv);
  } catch (const Error& e) {
    return refuse_flags(e.what(), argc, argv);
  }

  std::optional<StopSignalHandler> stop_signals;
  if (ctx.stop_signals_from_start) stop_signals.emplace();
  stop_when_launcher_dies(launcher_parent);
  std::optional<MpiSession> mpi;
  try {
    mpi.emplace(&argc, &argv);
  } catch (const std::exception& e) {
    fatal(e.what());
  }
  int rc = 0;
  try {
    const Topology topo = Topology::discover(ctx.topology);
    rc = ctx.action(topo);
  } catch (const InputError& e) {
    fatal(e.what(), kInputErrorExitCode);
  } catch (const LibraryError& e) {
    fatal(e.what(),
          ctx.errors_are_input && e.about_a_file() ? kInputErrorExitCode : kFatalExitCode);
  } catch (const Error& e) {
    fatal(e.what(), ctx.errors_are_input ? kInputErrorExitCode : kFatalExitCode);
  } catch (const std::exception& e) {
    fatal(std::string("unexpected exception: ") + e.what());
  }
  return rc;
}
