#include "ringtrain/comm/communicator.h"

#include "comm/backends.h"
#include "core/check_mpi.h"
#include "launch/mpi_context.h"
#include "ringtrain/core/check.h"
#include "ringtrain/core/host_sync.h"
#include "ringtrain/core/input_error.h"

namespace ringtrain {

std::string_view reduce_op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum:
      return "sum";
    case ReduceOp::avg:
      return "avg";
    case ReduceOp::max:
      return "max";
    case ReduceOp::min:
      return "min";
  }
  return "?";
}

ReduceOp parse_reduce_op(std::string_view name) {
  for (ReduceOp op : kAllReduceOps)
    if (reduce_op_name(op) == name) return op;
  if (name == "mean") return ReduceOp::avg;
  RT_CHECK(false, "unknown reduce op '{}' (expected one of sum, avg, max, min)", name);
}

Communicator::~Communicator() = default;

void Communicator::order_after(const OrderingPoint& point) {
  if (!point.empty()) host_sync::wait(point, fmt::format("{} backend: input ready", name()));
}

void Communicator::allreduce(BufferView in, BufferView out, ReduceOp op) {
  allreduce_async(in, out, op).wait();
}
void Communicator::broadcast(BufferView in, BufferView out, int root) {
  broadcast_async(in, out, root).wait();
}
void Communicator::allgather(BufferView in, BufferView out) {
  allgather_async(in, out).wait();
}
void Communicator::reduce_scatter(BufferView in, BufferView out, ReduceOp op) {
  reduce_scatter_async(in, out, op).wait();
}
void Communicator::barrier() {
  barrier_async().wait();
}

namespace {
void check_views(const Communicator& c, std::string_view what, BufferView in, BufferView out) {
  RT_CHECK(in.dtype == out.dtype,
           "{} on '{}' (rank {}): input dtype {} differs from output dtype {}", what, c.name(),
           c.rank(), dtype_name(in.dtype), dtype_name(out.dtype));
  for (const BufferView* v : {&in, &out}) {
    RT_CHECK(v->device == c.device(),
             "{} on '{}' (rank {}): a buffer on {} was passed to a communicator on {}", what,
             c.name(), c.rank(), device_name(v->device), device_name(c.device()));
    RT_CHECK(v->ptr != nullptr || v->count == 0,
             "{} on '{}' (rank {}): null buffer with {} elements", what, c.name(), c.rank(),
             v->count);
  }
}
}  // namespace

void Communicator::check_allreduce_args(BufferView in, BufferView out) const {
  check_views(*this, "allreduce", in, out);
  RT_CHECK(in.count == out.count, "allreduce on '{}' (rank {}): input has {} elements, output {}",
           name(), rank(), in.count, out.count);
}

void Communicator::check_broadcast_args(BufferView in, BufferView out, int root) const {
  RT_CHECK(root >= 0 && root < size(), "broadcast on '{}': root {} is not a rank of 0..{}", name(),
           root, size() - 1);
  if (rank() == root) {
    check_views(*this, "broadcast", in, out);
    RT_CHECK(in.count == out.count, "broadcast on '{}' (root {}): input has {} elements, output {}",
             name(), root, in.count, out.count);
  } else {
    check_views(*this, "broadcast", out, out);
  }
}

void Communicator::check_allgather_args(BufferView in, BufferView out) const {
  check_views(*this, "allgather", in, out);
  RT_CHECK(out.count == in.count * static_cast<std::size_t>(size()),
           "allgather on '{}' (rank {}): output has {} elements, expected input {} x {} ranks",
           name(), rank(), out.count, in.count, size());
}

void Communicator::check_reduce_scatter_args(BufferView in, BufferView out) const {
  check_views(*this, "reduce_scatter", in, out);
  RT_CHECK(in.count == out.count * static_cast<std::size_t>(size()),
           "reduce_scatter on '{}' (rank {}): input has {} elements, expected output {} x {} ranks",
           name(), rank(), in.count, out.count, size());
}

std::vector<std::string> available_backends(const Topology& topology) {
  std::vector<std::string> out;
  if (comm_detail::nccl_compiled() && topology.device().is_cuda() &&
      !topology.device_choice().shared)
    out.emplace_back("nccl");
  // On a GPU rank the host backends stage its buffers through pinned memory.
  out.emplace_back("shm");
  out.emplace_back("ring");
  out.emplace_back("mpi");
  return out;
}

std::string_view resolve_backend(std::string_view kind, bool gpu_rank, bool any_gpu_shared,
                                 int rank, std::string_view device) {
  if (kind == "auto") return gpu_rank && !any_gpu_shared ? "nccl" : "shm";
  if (kind == "nccl") {
    RT_CHECK(gpu_rank,
             "--backend nccl needs a GPU rank, but rank {} runs on {} (use --device cuda, or a CPU "
             "backend: shm, ring, mpi)",
             rank, device);
    RT_CHECK(
        !any_gpu_shared,
        "--backend nccl: ranks share a GPU (--allow-gpu-sharing; rank {} is on {}), and NCCL "
        "refuses "
        "two ranks of one communicator on the same GPU; use --backend auto or shm, which stage the "
        "GPU buffers through host memory",
        rank, device);
    return "nccl";
  }
  RT_CHECK(kind == "shm" || kind == "ring" || kind == "mpi",
           "unknown backend '{}' (expected auto, nccl, shm, ring or mpi)", kind);
  return kind;
}

std::unique_ptr<Communicator> make_communicator(std::string_view kind, const Topology& topology,
                                                const CommOptions& options) {
  RT_CHECK(options.timeout_seconds > 0, "--timeout must be positive, got {}",
           options.timeout_seconds);
  // Whether any rank of the job shares its GPU with another: then NCCL cannot
  // be used anywhere (it refuses two ranks on one GPU), and every rank must
  // pick the same backend.
  int any_shared = topology.device_choice().shared ? 1 : 0;
  RT_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &any_shared, 1, MPI_INT, MPI_MAX, mpi_context::world()));
  const bool gpu = topology.device().is_cuda();
  // A backend the ranks' devices cannot use (nccl on a CPU rank) is bad
  // configuration, exit 2: no restart would help.
  as_input_error([&] {
    kind = resolve_backend(kind, gpu, any_shared != 0, topology.rank(),
                           device_name(topology.device()));
  });
  if (kind == "nccl") return comm_detail::make_nccl_communicator(topology, options);
  // GPU ranks with a host backend: their buffers are staged through pinned memory.
  if (gpu) return comm_detail::make_staged_communicator(kind, topology, options);
  if (kind == "shm") return comm_detail::make_shm_communicator(topology, options);
  if (kind == "ring") return comm_detail::make_ring_communicator(topology, options);
  return comm_detail::make_mpi_communicator(topology, options);
}

}  // namespace ringtrain
