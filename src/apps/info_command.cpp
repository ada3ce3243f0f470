// `ringtrain info`: what was compiled in, which backends this job can use, and
// where every rank sits.
#include "apps/command.h"
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
  const bool gpu = topo.device().is_cuda();
  const bool nccl_usable = cuda_compiled() && gpu;
  out += "backends:\n";
  out += fmt::format("  nccl  {}\n", nccl_usable ? "available"
                                     : cuda_compiled() ? "compiled, unavailable (no GPU chosen)"
                                                       : "not compiled");
  out += fmt::format("  shm   available ({})\n", topo.node_count() > 1
                                                     ? "hierarchical: shared memory within a node, "
                                                       "ring across nodes"
                                                     : "one node: shared memory");
  out += "  ring  available\n";
  out += "  mpi   available\n";
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
