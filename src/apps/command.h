// How a subcommand plugs into the ringtrain executable. Each subcommand lives in
// its own src/apps/<name>_command.cpp and registers itself with
// RINGTRAIN_REGISTER_COMMAND; main() builds the CLI from the registry, parses,
// starts MPI and the topology, then runs the chosen action inside the failure
// policy (a ringtrain::Error on any rank ends the job).
#pragma once

#include <functional>
#include <string>

#include <CLI/CLI.hpp>

#include "ringtrain/launch/topology.h"

namespace ringtrain::apps {

struct CommandContext {
  TopologyOptions topology;
  // Clean-stop signals (SIGINT, SIGTERM, SIGUSR1) handled from before MPI
  // starts: a scheduler's signal during start-up then stops the run after its
  // first step, with a checkpoint, instead of killing the rank.
  bool stop_signals_from_start = false;
  // Whether an Error from the action (other than a LibraryError: MPI, a device
  // or a file system failing) is bad input, exit 2. `train` says no: it marks
  // its set-up's errors as input itself, and a step that fails is a runtime
  // failure (exit 3, which a restarting wrapper retries).
  bool errors_are_input = true;
  // Set by the chosen subcommand (usually in its parse_complete_callback).
  std::function<int(const Topology&)> action;
};

// --device auto|cpu|cuda and --allow-gpu-sharing, for commands that pick a device.
void add_device_options(CLI::App* sub, CommandContext& ctx, const char* default_device = "auto");
// --tf32 on|off|default into `value` (parse it with parse_tf32_mode).
void add_tf32_option(CLI::App* sub, std::string& value);
// --precision fp32|bf16|fp16 (ringtrain/ops/precision.h), for the commands
// that run a model outside `train` (which has its own, with the loss scaler).
void add_precision_option(CLI::App* sub, std::string& value);
// --layout auto|nchw|nhwc (ringtrain/tensor/layout.h), for every command that
// runs a model; parse it with parse_layout_choice.
void add_layout_option(CLI::App* sub, std::string& value);
// --fuse on|off (ModelOptions::fuse), for train, bench step and model show.
void add_fuse_option(CLI::App* sub, std::string& value);

// A registration adds one subcommand under `parent` ("" for top level, or e.g.
// "bench"). Parents are created before children; `order` sorts --help.
struct CommandRegistration {
  std::string parent;
  std::string name;
  int order = 100;
  std::function<CLI::App*(CLI::App& parent, CommandContext& ctx)> add;
};

bool register_command(CommandRegistration registration);
// Builds every registered command into `app`.
void build_commands(CLI::App& app, CommandContext& ctx);
// Makes every option of `app` and its subcommands that takes an unsigned count
// refuse a negative value, naming the flag and its range (unsigned_options.cpp).
void refuse_negative_counts(CLI::App& app);
// After CLI11 refused the command line: the first word that is neither a
// subcommand nor a flag of where it stands, said with the nearest known name
// ("unknown subcommand 'trian' ... (did you mean 'train'?)"); "" when every
// word is known (the error is about a value, said by CLI11 itself).
std::string command_line_typo(const CLI::App& app, int argc, char** argv);

}  // namespace ringtrain::apps

#define RT_CONCAT_INNER_(a, b) a##b
#define RT_CONCAT_(a, b) RT_CONCAT_INNER_(a, b)
// RINGTRAIN_REGISTER_COMMAND("bench", "allreduce", 10, add_fn): at static init.
#define RINGTRAIN_REGISTER_COMMAND(parent, name, order, add_fn)                               \
  namespace {                                                                                 \
  const bool RT_CONCAT_(rt_command_registered_,                                               \
                        __LINE__) = ::ringtrain::apps::register_command({parent, name, order, \
                                                                         add_fn});            \
  }
