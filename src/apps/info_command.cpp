// `ringtrain info`: what was compiled in, which backends this job can use, and
// where every rank sits.
#include <algorithm>
#include <string>
#include <vector>

#include "apps/command.h"
#include "ringtrain/comm/communicator.h"
#include "ringtrain/core/log.h"
#include "ringtrain/launch/library_versions.h"

namespace ringtrain::apps {

namespace {
int run_info(const Topology& topo) {
  if (topo.rank() != 0) return 0;
  const LibraryVersions v = library_versions();
  std::string out;
  out += fmt::format("ringtrain {}\n", v.ringtrain);
  out += "libraries:\n";
  out += fmt::format("  MPI       {}\n", v.mpi);
  out += fmt::format("  HDF5      {}\n", v.hdf5);
  out += fmt::format("  OpenBLAS  {}\n", v.openblas);
  out += fmt::format("  CUDA      runtime {}, driver {}\n", v.gpu.cuda_runtime, v.gpu.cuda_driver);
  out += fmt::format("  cuBLAS    {}\n", v.gpu.cublas);
  out += fmt::format("  cuDNN     {}\n", v.gpu.cudnn);
  out += fmt::format("  NCCL      {}\n", v.gpu.nccl);
  // What this rank can build, as the comm layer reports it.
  const std::vector<std::string> usable = available_backends(topo);
  auto usable_now = [&](const char* kind) {
    return std::find(usable.begin(), usable.end(), kind) != usable.end();
  };
  out += "backends:\n";
  out += fmt::format("  nccl  {}\n", usable_now("nccl") ? "available"
                                     : cuda_compiled()  ? "compiled, unavailable (no GPU chosen)"
                                                        : "not compiled");
  const char* cpu_note =
      topo.device().is_cuda() ? "compiled, unavailable on a GPU rank (use --device cpu)" : nullptr;
  out += fmt::format("  shm   {}\n", cpu_note ? cpu_note
                                     : usable_now("shm")
                                         ? (topo.node_count() > 1
                                                ? "available (hierarchical: shared memory within a "
                                                  "node, ring across nodes)"
                                                : "available (one node: shared memory)")
                                         : "unavailable");
  out += fmt::format("  ring  {}\n", cpu_note             ? cpu_note
                                     : usable_now("ring") ? "available"
                                                          : "unavailable");
  out += fmt::format("  mpi   {}\n", cpu_note            ? cpu_note
                                     : usable_now("mpi") ? "available"
                                                         : "unavailable");
  out += fmt::format("  auto  {}\n", usable.empty() ? "none" : usable.front());
  out += fmt::format("topology: {} rank(s) on {} node(s)\n", topo.world_size(), topo.node_count());
  out += topo.table();
  std::fputs(out.c_str(), stdout);
  std::fflush(stdout);
  return 0;
}

CLI::App* add_info_command(CLI::App& app, CommandContext& ctx) {
  CLI::App* sub = app.add_subcommand(
      "info", "Print library versions, available collective backends and the rank topology");
  add_device_options(sub, ctx);
  sub->parse_complete_callback([&ctx] { ctx.action = run_info; });
  return sub;
}

}  // namespace

}  // namespace ringtrain::apps

RINGTRAIN_REGISTER_COMMAND("", "info", 90, ringtrain::apps::add_info_command)
