// How a subcommand plugs into the ringtrain executable. Each subcommand file
// registers its flags on a CLI11 sub-app and sets `action`; main() parses,
// starts MPI and the topology, then runs the action inside the failure policy.
#pragma once

#include <functional>

#include <CLI/CLI.hpp>

#include "ringtrain/launch/topology.h"

namespace ringtrain::apps {

struct CommandContext {
  TopologyOptions topology;
  std::function<int(const Topology&)> action;
};

// --device auto|cpu|cuda and --allow-gpu-sharing, for commands that pick a device.
void add_device_options(CLI::App* sub, CommandContext& ctx, const char* default_device = "auto");

void add_info_command(CLI::App& app, CommandContext& ctx);

}  // namespace ringtrain::apps
