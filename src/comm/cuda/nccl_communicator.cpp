// The "nccl" backend: NCCL on a communication stream of its own, bootstrapped
// over MPI (rank 0 makes the unique id, MPI_Bcast shares it, every rank calls
// ncclCommInitRankConfig after its device is current). The communicator is
// non-blocking (config.blocking = 0), so no NCCL call can hang a rank.
//
// Ordering is by events: order_after() makes the communication stream wait on
// the producer's event, and each request carries an event behind its
// collective for the consumer's stream, so the trainer's step needs no host
// synchronisation. The host may therefore never wait on a collective; a
// watchdog thread (as PyTorch's ProcessGroupNCCL has) polls every outstanding
// collective's event and ncclCommGetAsyncError, and past --timeout ends the
// job through fatal(), whose abort hook calls ncclCommAbort first, naming the
// ranks that did not arrive.
//
// The flight recorder (flight_recorder.h) gets every collective at issue, on
// the host; its start and completion are learnt lazily by the same watchdog,
// from the events it polls anyway (never a blocking wait): a collective
// starts, at the latest, when it becomes the oldest outstanding one on the
// stream, and completes when the watchdog sees its event reached (within a
// poll period, 20 ms).
#include <cuda_runtime.h>
#include <nccl.h>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "comm/arrival_board.h"
#include "comm/backends.h"
#include "comm/deadline.h"
#include "comm/nccl_version.h"
#include "core/check_mpi.h"
#include "core/cuda/check_cuda.h"
#include "core/cuda/check_nccl.h"
#include "core/fault_plan.h"
#include "launch/mpi_context.h"
#include "ringtrain/comm/flight_recorder.h"
#include "ringtrain/core/check.h"
#include "ringtrain/core/fatal.h"
#include "ringtrain/core/host_sync.h"

namespace ringtrain::comm_detail {

bool nccl_compiled() {
  return true;
}

namespace {

ncclDataType_t nccl_type(DType t) {
  switch (t) {
    case DType::f32:
      return ncclFloat32;
    case DType::f64:
      return ncclFloat64;
    case DType::f16:
      return ncclFloat16;
    case DType::bf16:
      return ncclBfloat16;
    case DType::i32:
      return ncclInt32;
    case DType::i64:
      return ncclInt64;
  }
  return ncclFloat32;
}

ncclRedOp_t nccl_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum:
      return ncclSum;
    case ReduceOp::avg:
      return ncclAvg;
    case ReduceOp::max:
      return ncclMax;
    case ReduceOp::min:
      return ncclMin;
  }
  return ncclSum;
}

class NcclCommunicator;

class NcclRequest final : public CommRequest::State {
 public:
  NcclRequest(NcclCommunicator& owner, std::string what, std::uint64_t seq, OrderingPoint done)
      : owner_(owner),
        what_(std::move(what)),
        seq_(seq),
        done_point_(std::move(done)),
        deadline_(owner_timeout(owner)) {}
  bool test() override;
  void wait() override;
  OrderingPoint completion() const override { return done_point_; }

 private:
  static double owner_timeout(const NcclCommunicator& owner);
  NcclCommunicator& owner_;
  std::string what_;
  std::uint64_t seq_;
  OrderingPoint done_point_;
  Deadline deadline_;  // from the issue, so repeated test() calls do time out
  bool done_ = false;
};

class NcclCommunicator final : public Communicator {
 public:
  NcclCommunicator(const Topology& topo, const CommOptions& options)
      : Communicator(topo.rank(), topo.world_size(), topo.device(), options),
        board_(mpi_context::local(), mpi_context::world()) {
    // A libnccl older than the headers fails later in obscure ways (unknown
    // config fields, missing symbols): say so plainly, on every rank.
    int loaded = 0;
    RT_NCCL_CHECK(ncclGetVersion(&loaded));
    const NcclVersionCheck version = nccl_version_compatible(NCCL_VERSION_CODE, loaded);
    RT_CHECK(version.ok, "{}", version.message);
    RT_CUDA_CHECK(cudaSetDevice(device().index));
    RT_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    // The test of a rank that never joins (the others' init must time out,
    // naming it): RINGTRAIN_FAULT_NCCL_LATE_RANK (fault_plan.h).
    if (const FaultPlan* faults = FaultPlan::planned()) faults->delay_nccl_join(rank());
    ncclUniqueId id{};
    if (rank() == 0) RT_NCCL_CHECK(ncclGetUniqueId(&id));
    RT_MPI_CHECK(MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, mpi_context::world()));
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    RT_NCCL_CHECK(ncclCommInitRankConfig(&comm_, size(), id, rank(), &config));
    // From here a fatal error on any thread aborts the communicator first.
    hook_ = register_abort_hook([c = comm_] { ncclCommAbort(c); });
    settle("ncclCommInitRankConfig", 0, Deadline(options.timeout_seconds, &board_));
    RT_CUDA_CHECK(cudaMalloc(&barrier_word_, sizeof(float)));
    watchdog_ = std::thread([this] { watch(); });
  }

  ~NcclCommunicator() override {
    // While an exception propagates, the job is about to end through fatal(),
    // whose hook aborts the communicator: leave it to that.
    if (unwinding()) {
      stop_watchdog();
      return;
    }
    // Drain what is queued (the watchdog still guards it), then take the
    // communicator down cleanly.
    const Deadline deadline(options().timeout_seconds);
    while (!detail::cuda_poll_stream(stream_)) {
      check_async("shutdown", seq_, deadline);
      sched_yield();
    }
    stop_watchdog();
    ncclCommFinalize(comm_);
    settle("ncclCommFinalize", seq_, deadline);
    unregister_abort_hook(hook_);
    ncclCommDestroy(comm_);
    for (void* p : allocations_) cudaFree(p);
    cudaFree(barrier_word_);
    cudaStreamDestroy(stream_);
  }

  std::string_view name() const override { return "nccl"; }

  void order_after(const OrderingPoint& point) override { point.order_stream(stream_); }

  CommRequest allreduce_async(BufferView in, BufferView out, ReduceOp op) override {
    check_allreduce_args(in, out);
    if (size() == 1) {
      // Every op of one rank is the identity. NCCL 2.28.3's ncclAvg on f64 at
      // one rank, out of place, left the last (count mod 4) elements unwritten
      // (seen on an H100); a copy is exact and cheaper.
      return issue("allreduce", in.bytes(), [&] {
        if (in.ptr != out.ptr && in.count > 0)
          RT_CUDA_CHECK(
              cudaMemcpyAsync(out.ptr, in.ptr, in.bytes(), cudaMemcpyDeviceToDevice, stream_));
        return ncclSuccess;
      });
    }
    return issue("allreduce", in.bytes(), [&] {
      return ncclAllReduce(in.ptr, out.ptr, in.count, nccl_type(in.dtype), nccl_op(op), comm_,
                           stream_);
    });
  }
  CommRequest broadcast_async(BufferView in, BufferView out, int root) override {
    check_broadcast_args(in, out, root);
    return issue("broadcast", out.bytes(), [&] {
      return ncclBroadcast(rank() == root ? in.ptr : out.ptr, out.ptr, out.count,
                           nccl_type(out.dtype), root, comm_, stream_);
    });
  }
  CommRequest allgather_async(BufferView in, BufferView out) override {
    check_allgather_args(in, out);
    return issue("allgather", in.bytes(), [&] {
      return ncclAllGather(in.ptr, out.ptr, in.count, nccl_type(in.dtype), comm_, stream_);
    });
  }
  CommRequest reduce_scatter_async(BufferView in, BufferView out, ReduceOp op) override {
    check_reduce_scatter_args(in, out);
    return issue("reduce_scatter", in.bytes(), [&] {
      return ncclReduceScatter(in.ptr, out.ptr, out.count, nccl_type(in.dtype), nccl_op(op), comm_,
                               stream_);
    });
  }
  CommRequest barrier_async() override {
    // NCCL has no barrier: a one-element all-reduce serves, as in DDP.
    return issue("barrier", 0, [&] {
      return ncclAllReduce(barrier_word_, barrier_word_, 1, ncclFloat32, ncclSum, comm_, stream_);
    });
  }

  BufferView allocate(std::size_t count, DType dtype) override {
    void* p = nullptr;
    RT_CUDA_CHECK(cudaMalloc(&p, std::max<std::size_t>(count * dtype_size(dtype), 256)));
    allocations_.push_back(p);
    return {p, count, dtype, device()};
  }

  // Fails the job if NCCL reported an asynchronous error or the deadline passed.
  void check_async(const std::string& what, std::uint64_t seq, const Deadline& deadline) {
    ncclResult_t state = ncclSuccess;
    const ncclResult_t rc = ncclCommGetAsyncError(comm_, &state);
    if (rc != ncclSuccess || (state != ncclSuccess && state != ncclInProgress))
      fatal(fmt::format("nccl {} #{} failed on rank {}: {} ({})", what, seq, rank(),
                        ncclGetErrorString(rc != ncclSuccess ? rc : state),
                        ncclGetLastError(comm_)));
    if (deadline.expired()) {
      // A rank of this node that died ends the wait at once (ArrivalBoard).
      if (const std::vector<LostRank> lost = board_.lost(); !lost.empty()) {
        std::vector<std::string> who;
        for (const LostRank& l : lost)
          who.push_back(fmt::format("{} (process {})", l.world_rank, l.pid));
        fatal(
            fmt::format("nccl {} #{}: rank(s) {} died: the process is gone (rank {} aborts the "
                        "NCCL communicator)",
                        what, seq, fmt::join(who, ", "), rank()));
      }
      const std::vector<int> missing = board_.behind(seq);
      fatal(fmt::format(
          "nccl {} #{} timed out after {} s: {} (rank {} aborts the NCCL communicator)", what, seq,
          deadline.seconds(),
          missing.empty() ? std::string("every rank on this node issued it; a peer on another "
                                        "node or the network is stuck")
                          : fmt::format("rank(s) {} did not arrive", fmt::join(missing, ", ")),
          rank()));
    }
  }

  double timeout() const { return options().timeout_seconds; }

 private:
  // Non-blocking NCCL may return ncclInProgress; the call is complete (enqueued)
  // once the async state leaves it.
  void settle(const std::string& what, std::uint64_t seq, const Deadline& deadline) {
    for (;;) {
      ncclResult_t state = ncclSuccess;
      const ncclResult_t rc = ncclCommGetAsyncError(comm_, &state);
      if (rc == ncclSuccess && state == ncclSuccess) return;
      check_async(what, seq, deadline);
      sched_yield();
    }
  }

  template <typename Call>
  CommRequest issue(const std::string& what, std::size_t bytes, Call&& call) {
    const std::uint64_t seq = ++seq_;
    const std::uint64_t record = flight::on_issue(
        options().flight_channel.empty() ? name() : std::string_view(options().flight_channel),
        name(), what, seq, bytes);
    board_.enter(seq);
    const ncclResult_t rc = call();
    if (rc != ncclSuccess && rc != ncclInProgress)
      fatal(fmt::format("nccl {} #{} could not be issued on rank {}: {} ({})", what, seq, rank(),
                        ncclGetErrorString(rc), ncclGetLastError(comm_)));
    settle(what, seq, Deadline(options().timeout_seconds, &board_));
    OrderingPoint done = OrderingPoint::record(device(), stream_);
    {
      std::lock_guard lock(watch_mutex_);
      // Nothing ahead of it on the stream: it may start now.
      if (outstanding_.empty()) flight::on_start(record);
      outstanding_.push_back(
          {seq, what, done, Deadline(options().timeout_seconds, &board_), record});
    }
    return CommRequest(std::make_shared<NcclRequest>(*this, what, seq, std::move(done)));
  }

  struct Outstanding {
    std::uint64_t seq;
    std::string what;
    OrderingPoint done;
    Deadline deadline;
    std::uint64_t record;  // flight recorder id
  };

  // The watchdog: the oldest outstanding collective is the one that can be
  // stuck (they complete in issue order on one stream).
  void watch() {
    try {
      RT_CUDA_CHECK(cudaSetDevice(device().index));
      std::unique_lock lock(watch_mutex_);
      while (!watch_stop_) {
        watch_wake_.wait_for(lock, std::chrono::milliseconds(20));
        while (!outstanding_.empty() && outstanding_.front().done.reached()) {
          flight::on_complete(outstanding_.front().record);
          outstanding_.pop_front();
          if (!outstanding_.empty()) flight::on_start(outstanding_.front().record);
        }
        if (outstanding_.empty()) continue;
        const Outstanding& oldest = outstanding_.front();
        check_async(oldest.what, oldest.seq, oldest.deadline);
      }
    } catch (const std::exception& e) {
      fatal(fmt::format("nccl watchdog on rank {}: {}", rank(), e.what()));
    }
  }

  void stop_watchdog() {
    {
      std::lock_guard lock(watch_mutex_);
      watch_stop_ = true;
    }
    watch_wake_.notify_all();
    if (watchdog_.joinable()) watchdog_.join();
  }

  ArrivalBoard board_;
  ncclComm_t comm_ = nullptr;
  cudaStream_t stream_ = nullptr;
  AbortHookId hook_ = 0;
  std::uint64_t seq_ = 0;
  float* barrier_word_ = nullptr;
  std::vector<void*> allocations_;
  std::mutex watch_mutex_;
  std::condition_variable watch_wake_;
  std::deque<Outstanding> outstanding_;
  bool watch_stop_ = false;
  std::thread watchdog_;
};

double NcclRequest::owner_timeout(const NcclCommunicator& owner) {
  return owner.timeout();
}

bool NcclRequest::test() {
  if (done_) return true;
  if (done_point_.reached()) return done_ = true;
  owner_.check_async(what_, seq_, deadline_);
  return false;
}

// A host wait: counted (host_sync), and polled rather than blocking in
// cudaEventSynchronize, so an NCCL error or the timeout is noticed here too.
void NcclRequest::wait() {
  if (done_) return;
  host_sync::note(done_point_.device(), what_);
  while (!done_point_.reached()) {
    owner_.check_async(what_, seq_, deadline_);
    sched_yield();
  }
  done_ = true;
}

}  // namespace

std::unique_ptr<Communicator> make_nccl_communicator(const Topology& topology,
                                                     const CommOptions& options) {
  return std::make_unique<NcclCommunicator>(topology, options);
}

}  // namespace ringtrain::comm_detail
