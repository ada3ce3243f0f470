#include "ringtrain/launch/topology.h"

#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include <fmt/ranges.h>

#include "core/check_mpi.h"
#include "core/fatal_agreement.h"
#include "launch/mpi_context.h"
#include "launch/single_copy_probe.h"
#include "launch/tcp_eager_limit.h"
#include "ringtrain/core/check.h"
#include "ringtrain/core/error.h"
#include "ringtrain/core/input_error.h"
#include "ringtrain/core/log.h"
#include "ringtrain/launch/gpu_runtime.h"

namespace ringtrain {

namespace {
MPI_Comm g_world = MPI_COMM_NULL;
MPI_Comm g_local = MPI_COMM_NULL;
MPI_Comm g_cross = MPI_COMM_NULL;

std::string host_name() {
  char buf[HOST_NAME_MAX + 1] = {};
  if (gethostname(buf, sizeof(buf) - 1) != 0) return "unknown";
  return buf;
}

void free_comm(MPI_Comm& c) {
  if (c != MPI_COMM_NULL) MPI_Comm_free(&c);
  c = MPI_COMM_NULL;
}

// Fixed-width record for the placement all-gather.
struct PlacementRecord {
  int rank, node, local_rank, local_size;
  char host[64];
  char device[160];
};

// Every local rank's list of physical GPU ids, all-gathered over the node
// (element i is local rank i's list). Ids hold no newline: one per line.
std::vector<std::vector<std::string>> gather_over_node(const std::vector<std::string>& ids,
                                                       MPI_Comm local) {
  std::string packed;
  for (const auto& id : ids) packed += id + "\n";
  int n = 0;
  RT_MPI_CHECK(MPI_Comm_size(local, &n));
  const int len = static_cast<int>(packed.size());
  std::vector<int> lens(static_cast<std::size_t>(n)), offsets(static_cast<std::size_t>(n));
  RT_MPI_CHECK(MPI_Allgather(&len, 1, MPI_INT, lens.data(), 1, MPI_INT, local));
  int total = 0;
  for (int i = 0; i < n; ++i) {
    offsets[static_cast<std::size_t>(i)] = total;
    total += lens[static_cast<std::size_t>(i)];
  }
  std::string all(static_cast<std::size_t>(total), '\0');
  RT_MPI_CHECK(MPI_Allgatherv(packed.data(), len, MPI_CHAR, all.data(), lens.data(), offsets.data(),
                              MPI_CHAR, local));
  std::vector<std::vector<std::string>> out(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) {
    std::string_view rest(all.data() + offsets[static_cast<std::size_t>(i)],
                          static_cast<std::size_t>(lens[static_cast<std::size_t>(i)]));
    for (std::size_t nl; (nl = rest.find('\n')) != std::string_view::npos;
         rest.remove_prefix(nl + 1))
      out[static_cast<std::size_t>(i)].emplace_back(rest.substr(0, nl));
  }
  return out;
}
}  // namespace

namespace mpi_context {
MPI_Comm world() {
  return g_world != MPI_COMM_NULL ? g_world : MPI_COMM_WORLD;
}
MPI_Comm local() {
  return g_local;
}
MPI_Comm cross_node() {
  return g_cross;
}
}  // namespace mpi_context

MpiSession::MpiSession(int* argc, char*** argv) {
  int provided = 0;
  // Open MPI reads its transport settings from the environment during init.
  choose_single_copy_mechanism();
  choose_tcp_eager_limit();
  RT_MPI_CHECK(MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided));
  // Library errors come back as codes and are thrown with file:line, rather
  // than MPI killing the process with its own, less specific message.
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  open_fatal_agreement();
  if (provided < MPI_THREAD_MULTIPLE) {
    char version[MPI_MAX_LIBRARY_VERSION_STRING];
    int len = 0;
    MPI_Get_library_version(version, &len);
    throw Error(fmt::format(
        "the MPI library granted thread level {} but ringtrain needs MPI_THREAD_MULTIPLE ({}) for "
        "its communication thread; MPI: {}",
        provided, MPI_THREAD_MULTIPLE, std::string(version, static_cast<std::size_t>(len))));
  }
}

MpiSession::~MpiSession() {
  free_comm(g_cross);
  free_comm(g_local);
  free_comm(g_world);
  close_fatal_agreement();
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

Topology Topology::discover(const TopologyOptions& options) {
  Topology t;
  if (g_world == MPI_COMM_NULL) {
    RT_MPI_CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &g_world));
    MPI_Comm_set_errhandler(g_world, MPI_ERRORS_RETURN);
  }
  RT_MPI_CHECK(MPI_Comm_rank(g_world, &t.rank_));
  RT_MPI_CHECK(MPI_Comm_size(g_world, &t.world_size_));
  t.host_ = host_name();
  set_log_identity({t.rank_, t.world_size_, t.host_});

  free_comm(g_local);
  RT_MPI_CHECK(
      MPI_Comm_split_type(g_world, MPI_COMM_TYPE_SHARED, t.rank_, MPI_INFO_NULL, &g_local));
  MPI_Comm_set_errhandler(g_local, MPI_ERRORS_RETURN);
  RT_MPI_CHECK(MPI_Comm_rank(g_local, &t.local_rank_));
  RT_MPI_CHECK(MPI_Comm_size(g_local, &t.local_size_));

  // Node index: the leaders (local rank 0) number themselves in world order,
  // then each leader tells its node.
  MPI_Comm leaders = MPI_COMM_NULL;
  RT_MPI_CHECK(MPI_Comm_split(g_world, t.local_rank_ == 0 ? 0 : MPI_UNDEFINED, t.rank_, &leaders));
  int node_info[2] = {0, 1};
  if (leaders != MPI_COMM_NULL) {
    RT_MPI_CHECK(MPI_Comm_rank(leaders, &node_info[0]));
    RT_MPI_CHECK(MPI_Comm_size(leaders, &node_info[1]));
    MPI_Comm_free(&leaders);
  }
  RT_MPI_CHECK(MPI_Bcast(node_info, 2, MPI_INT, 0, g_local));
  t.node_ = node_info[0];
  t.node_count_ = node_info[1];

  free_comm(g_cross);
  RT_MPI_CHECK(MPI_Comm_split(g_world, t.local_rank_, t.node_, &g_cross));
  MPI_Comm_set_errhandler(g_cross, MPI_ERRORS_RETURN);

  // Device choice comes before any CUDA context or NCCL communicator exists.
  // --device cpu never asks CUDA anything.
  DeviceChoiceInput in;
  in.request = options.device;
  in.local_rank = t.local_rank_;
  in.allow_gpu_sharing = options.allow_gpu_sharing;
  in.host = t.host_;
  if (const char* cvd = std::getenv("CUDA_VISIBLE_DEVICES")) in.cuda_visible_devices = cvd;
  std::vector<std::string> my_gpus;
  if (options.device != DeviceRequest::cpu) {
    const CudaAssessment cuda = assess_cuda_probe(cuda_probe(), nvidia_device_nodes_present());
    RT_CHECK(!cuda.fatal, "--device {} on host {}: {}", device_request_name(options.device),
             t.host_, cuda.problem);
    in.no_gpu_reason = cuda.problem;
    static bool warned = false;  // once per process, and per node: local rank 0 speaks
    if (!cuda.problem.empty() && options.device == DeviceRequest::automatic && t.local_rank_ == 0 &&
        !warned) {
      warned = true;
      log_warn("--device auto: {}; using the CPU", cuda.problem);
    }
    if (cuda.count > 0) my_gpus = cuda_visible_device_uuids();
  }
  // Every rank joins, --device cpu too, so the collectives always match.
  in.visible = gather_over_node(my_gpus, g_local);
  // A device that is not there (--device cuda on a host without GPUs) is bad
  // configuration, exit 2: no restart would find one.
  as_input_error([&] { t.device_ = choose_device(in); });
  if (t.device_.device.is_cuda()) cuda_set_device(t.device_.device.index);

  PlacementRecord mine{};
  mine.rank = t.rank_;
  mine.node = t.node_;
  mine.local_rank = t.local_rank_;
  mine.local_size = t.local_size_;
  std::snprintf(mine.host, sizeof(mine.host), "%s", t.host_.c_str());
  std::string dev = device_name(t.device_.device);
  if (t.device_.device.is_cuda()) {
    const DeviceChoice& c = t.device_;
    dev += fmt::format(" (GPU {}", c.physical_label);
    if (c.uuid != c.physical_label) dev += ", " + c.uuid;
    if (c.shared)
      dev += fmt::format(", shared by local ranks {}", fmt::join(c.gpu_local_ranks, ","));
    dev += ")";
  }
  std::snprintf(mine.device, sizeof(mine.device), "%s", dev.c_str());
  std::vector<PlacementRecord> all(static_cast<std::size_t>(t.world_size_));
  RT_MPI_CHECK(
      MPI_Allgather(&mine, sizeof(mine), MPI_BYTE, all.data(), sizeof(mine), MPI_BYTE, g_world));
  for (const auto& r : all)
    t.placements_.push_back({r.rank, r.host, r.node, r.local_rank, r.local_size, r.device});
  return t;
}

std::string Topology::table() const {
  std::size_t host_w = 4;
  for (const auto& p : placements_) host_w = std::max(host_w, p.host.size());
  std::string out = fmt::format("{:>5}  {:<{}}  {:>4}  {:>10}  {}\n", "rank", "host", host_w,
                                "node", "local_rank", "device");
  for (const auto& p : placements_)
    out += fmt::format("{:>5}  {:<{}}  {:>4}  {:>10}  {}\n", p.rank, p.host, host_w, p.node,
                       fmt::format("{}/{}", p.local_rank, p.local_size), p.device);
  return out;
}

}  // namespace ringtrain
