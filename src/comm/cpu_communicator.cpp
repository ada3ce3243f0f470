#include "comm/cpu_communicator.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "ringtrain/comm/flight_recorder.h"

namespace ringtrain::comm_detail {

CpuCommunicator::CpuCommunicator(int rank, int size, const CommOptions& options, MPI_Comm node,
                                 MPI_Comm world)
    : Communicator(rank, size, Device::cpu(), options),
      board_(node, world),
      thread_(options.timeout_seconds) {}

CpuCommunicator::~CpuCommunicator() {
  thread_.stop();
}

template <typename Run>
std::function<void()> CpuCommunicator::wrap(std::string_view what, std::size_t bytes, Run run) {
  // The sequence number is taken at issue time, in issue order, so it names
  // the same collective on every rank.
  const std::uint64_t seq = ++next_seq_;
  const double timeout = options().timeout_seconds;
  const std::uint64_t record = flight::on_issue(
      options().flight_channel.empty() ? name() : std::string_view(options().flight_channel),
      name(), what, seq, bytes);
  return [this, seq, what, timeout, record, run = std::move(run)]() {
    flight::on_start(record);
    board_.enter(seq);
    const OpContext ctx{seq, what, Deadline(timeout, &board_)};
    run(ctx);
    flight::on_complete(record);
  };
}

void CpuCommunicator::timed_out(const OpContext& ctx, const std::string& waiting_on) const {
  // A rank of this node that died ended the wait early (ArrivalBoard watches).
  if (const std::vector<LostRank> lost = board_.lost(); !lost.empty()) {
    std::vector<std::string> who;
    for (const LostRank& l : lost)
      who.push_back(fmt::format("{} (process {})", l.world_rank, l.pid));
    throw CommTimeout(
        fmt::format("{} {} #{}: rank(s) {} died: the process is gone (rank {} was "
                    "waiting for {})",
                    name(), ctx.what, ctx.seq, fmt::join(who, ", "), rank(), waiting_on),
        -1);
  }
  const std::vector<int> missing = board_.behind(ctx.seq);
  std::string who;
  if (!missing.empty())
    who = fmt::format("rank(s) {} did not arrive", fmt::join(missing, ", "));
  else if (board_.covers_world())
    who = "every rank arrived but a peer stopped making progress";
  else
    who = "every rank on this node arrived; the missing rank is on another node";
  throw CommTimeout(
      fmt::format("{} {} #{} timed out after {} s: {} (rank {} was waiting for {})", name(),
                  ctx.what, ctx.seq, ctx.deadline.seconds(), who, rank(), waiting_on),
      -1);
}

CommRequest CpuCommunicator::allreduce_async(BufferView in, BufferView out, ReduceOp op) {
  check_allreduce_args(in, out);
  return thread_.submit("allreduce",
                        wrap("allreduce", in.bytes(), [this, in, out, op](const OpContext& c) {
                          run_allreduce(in, out, op, c);
                        }));
}
CommRequest CpuCommunicator::broadcast_async(BufferView in, BufferView out, int root) {
  check_broadcast_args(in, out, root);
  return thread_.submit("broadcast",
                        wrap("broadcast", out.bytes(), [this, in, out, root](const OpContext& c) {
                          run_broadcast(in, out, root, c);
                        }));
}
CommRequest CpuCommunicator::allgather_async(BufferView in, BufferView out) {
  check_allgather_args(in, out);
  return thread_.submit("allgather",
                        wrap("allgather", out.bytes(),
                             [this, in, out](const OpContext& c) { run_allgather(in, out, c); }));
}
CommRequest CpuCommunicator::reduce_scatter_async(BufferView in, BufferView out, ReduceOp op) {
  check_reduce_scatter_args(in, out);
  return thread_.submit("reduce_scatter",
                        wrap("reduce_scatter", in.bytes(), [this, in, out, op](const OpContext& c) {
                          run_reduce_scatter(in, out, op, c);
                        }));
}
CommRequest CpuCommunicator::barrier_async() {
  return thread_.submit("barrier",
                        wrap("barrier", 0, [this](const OpContext& c) { run_barrier(c); }));
}

void CpuCommunicator::allreduce(BufferView in, BufferView out, ReduceOp op) {
  check_allreduce_args(in, out);
  thread_.run_blocking("allreduce",
                       wrap("allreduce", in.bytes(), [this, in, out, op](const OpContext& c) {
                         run_allreduce(in, out, op, c);
                       }));
}
void CpuCommunicator::broadcast(BufferView in, BufferView out, int root) {
  check_broadcast_args(in, out, root);
  thread_.run_blocking("broadcast",
                       wrap("broadcast", out.bytes(), [this, in, out, root](const OpContext& c) {
                         run_broadcast(in, out, root, c);
                       }));
}
void CpuCommunicator::allgather(BufferView in, BufferView out) {
  check_allgather_args(in, out);
  thread_.run_blocking("allgather",
                       wrap("allgather", out.bytes(),
                            [this, in, out](const OpContext& c) { run_allgather(in, out, c); }));
}
void CpuCommunicator::reduce_scatter(BufferView in, BufferView out, ReduceOp op) {
  check_reduce_scatter_args(in, out);
  thread_.run_blocking("reduce_scatter",
                       wrap("reduce_scatter", in.bytes(), [this, in, out, op](const OpContext& c) {
                         run_reduce_scatter(in, out, op, c);
                       }));
}
void CpuCommunicator::barrier() {
  thread_.run_blocking("barrier",
                       wrap("barrier", 0, [this](const OpContext& c) { run_barrier(c); }));
}

}  // namespace ringtrain::comm_detail
