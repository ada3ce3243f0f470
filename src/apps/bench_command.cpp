// `ringtrain bench`: the parent of the benchmarks (allreduce, broadcast,
// allgather, data, step). Each benchmark registers itself under "bench".
#include "apps/command.h"

namespace ringtrain::apps {
namespace {
CLI::App* add_bench_command(CLI::App& app, CommandContext&) {
  CLI::App* bench = app.add_subcommand(
      "bench", "Benchmarks: collectives (nccl-tests style), the data path, one training step");
  bench->require_subcommand(1);
  return bench;
}
}  // namespace
}  // namespace ringtrain::apps

RINGTRAIN_REGISTER_COMMAND("", "bench", 50, ringtrain::apps::add_bench_command)
