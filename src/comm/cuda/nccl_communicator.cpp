// The "nccl" backend: NCCL on a communication stream of its own, bootstrapped
// over MPI (rank 0 makes the unique id, MPI_Bcast shares it, every rank calls
// ncclCommInitRankConfig after its device is current). The communicator is
// non-blocking (config.blocking = 0), so no NCCL call can hang a rank: every
// wait polls cudaEventQuery and ncclCommGetAsyncError against the timeout. An
// error or a timeout ends the job through fatal(), whose abort hook calls
// ncclCommAbort first (nccl-tests does the same).
#include <cuda_runtime.h>
#include <nccl.h>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <memory>
#include <vector>

#include "comm/arrival_board.h"
#include "comm/backends.h"
#include "comm/deadline.h"
#include "comm/nccl_version.h"
#include "core/check_mpi.h"
#include "core/cuda/check_cuda.h"
#include "launch/mpi_context.h"
#include "ringtrain/core/check.h"
#include "ringtrain/core/fatal.h"

namespace ringtrain::comm_detail {

bool nccl_compiled() { return true; }

namespace {

ncclDataType_t nccl_type(DType t) {
  switch (t) {
    case DType::f32: return ncclFloat32;
    case DType::f64: return ncclFloat64;
    case DType::f16: return ncclFloat16;
    case DType::bf16: return ncclBfloat16;
    case DType::i32: return ncclInt32;
    case DType::i64: return ncclInt64;
  }
  return ncclFloat32;
}

ncclRedOp_t nccl_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum: return ncclSum;
    case ReduceOp::avg: return ncclAvg;
    case ReduceOp::max: return ncclMax;
    case ReduceOp::min: return ncclMin;
  }
  return ncclSum;
}

class NcclCommunicator;

class NcclRequest final : public CommRequest::State {
 public:
  NcclRequest(NcclCommunicator& owner, std::string what, std::uint64_t seq, cudaEvent_t event)
      : owner_(owner), what_(std::move(what)), seq_(seq), event_(event) {}
  ~NcclRequest() override {
    if (event_) cudaEventDestroy(event_);
  }
  bool test() override;
  void wait() override;

 private:
  NcclCommunicator& owner_;
  std::string what_;
  std::uint64_t seq_;
  cudaEvent_t event_;
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
    ncclUniqueId id{};
    if (rank() == 0) RT_NCCL_CHECK(ncclGetUniqueId(&id));
    RT_MPI_CHECK(MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, mpi_context::world()));
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    RT_NCCL_CHECK(ncclCommInitRankConfig(&comm_, size(), id, rank(), &config));
    // From here a fatal error on any thread aborts the communicator first.
    hook_ = register_abort_hook([c = comm_] { ncclCommAbort(c); });
    settle("ncclCommInitRankConfig", 0, Deadline(options.timeout_seconds));
    RT_CUDA_CHECK(cudaMalloc(&barrier_word_, sizeof(float)));
  }

  ~NcclCommunicator() override {
    // While an exception propagates, the job is about to end through fatal(),
    // whose hook aborts the communicator: leave it to that.
    if (unwinding()) return;
    // Drain what is queued, then take the communicator down cleanly.
    const Deadline deadline(options().timeout_seconds);
    while (cudaStreamQuery(stream_) == cudaErrorNotReady) {
      check_async("shutdown", seq_, deadline);
      sched_yield();
    }
    ncclCommFinalize(comm_);
    settle("ncclCommFinalize", seq_, deadline);
    unregister_abort_hook(hook_);
    ncclCommDestroy(comm_);
    for (void* p : allocations_) cudaFree(p);
    cudaFree(barrier_word_);
    cudaStreamDestroy(stream_);
  }

  std::string_view name() const override { return "nccl"; }

  CommRequest allreduce_async(BufferView in, BufferView out, ReduceOp op) override {
    check_allreduce_args(in, out);
    return issue("allreduce", [&] {
      return ncclAllReduce(in.ptr, out.ptr, in.count, nccl_type(in.dtype), nccl_op(op), comm_, stream_);
    });
  }
  CommRequest broadcast_async(BufferView in, BufferView out, int root) override {
    check_broadcast_args(in, out, root);
    return issue("broadcast", [&] {
      return ncclBroadcast(rank() == root ? in.ptr : out.ptr, out.ptr, out.count, nccl_type(out.dtype), root,
                           comm_, stream_);
    });
  }
  CommRequest allgather_async(BufferView in, BufferView out) override {
    check_allgather_args(in, out);
    return issue("allgather", [&] {
      return ncclAllGather(in.ptr, out.ptr, in.count, nccl_type(in.dtype), comm_, stream_);
    });
  }
  CommRequest reduce_scatter_async(BufferView in, BufferView out, ReduceOp op) override {
    check_reduce_scatter_args(in, out);
    return issue("reduce_scatter", [&] {
      return ncclReduceScatter(in.ptr, out.ptr, out.count, nccl_type(in.dtype), nccl_op(op), comm_, stream_);
    });
  }
  CommRequest barrier_async() override {
    // NCCL has no barrier: a one-element all-reduce serves, as in DDP.
    return issue("barrier", [&] {
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
                        ncclGetErrorString(rc != ncclSuccess ? rc : state), ncclGetLastError(comm_)));
    if (deadline.expired()) {
      const std::vector<int> missing = board_.behind(seq);
      fatal(fmt::format("nccl {} #{} timed out after {} s: {} (rank {} aborts the NCCL communicator)", what, seq,
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
  CommRequest issue(const std::string& what, Call&& call) {
    const std::uint64_t seq = ++seq_;
    board_.enter(seq);
    const ncclResult_t rc = call();
    if (rc != ncclSuccess && rc != ncclInProgress)
      fatal(fmt::format("nccl {} #{} could not be issued on rank {}: {} ({})", what, seq, rank(),
                        ncclGetErrorString(rc), ncclGetLastError(comm_)));
    settle(what, seq, Deadline(options().timeout_seconds));
    cudaEvent_t event = nullptr;
    RT_CUDA_CHECK(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
    RT_CUDA_CHECK(cudaEventRecord(event, stream_));
    return CommRequest(std::make_shared<NcclRequest>(*this, what, seq, event));
  }

  ArrivalBoard board_;
  ncclComm_t comm_ = nullptr;
  cudaStream_t stream_ = nullptr;
  AbortHookId hook_ = 0;
  std::uint64_t seq_ = 0;
  float* barrier_word_ = nullptr;
  std::vector<void*> allocations_;
};

bool NcclRequest::test() {
  if (done_) return true;
  const cudaError_t e = cudaEventQuery(event_);
  if (e == cudaSuccess) return done_ = true;
  if (e != cudaErrorNotReady)
    fatal(fmt::format("nccl {} #{}: CUDA error {} while waiting", what_, seq_, cudaGetErrorString(e)));
  owner_.check_async(what_, seq_, Deadline(owner_.timeout()));
  return false;
}

void NcclRequest::wait() {
  const Deadline deadline(owner_.timeout());
  while (!done_) {
    const cudaError_t e = cudaEventQuery(event_);
    if (e == cudaSuccess) {
      done_ = true;
      break;
    }
    if (e != cudaErrorNotReady)
      fatal(fmt::format("nccl {} #{}: CUDA error {} while waiting", what_, seq_, cudaGetErrorString(e)));
    owner_.check_async(what_, seq_, deadline);
    sched_yield();
  }
}

}  // namespace

std::unique_ptr<Communicator> make_nccl_communicator(const Topology& topology, const CommOptions& options) {
  return std::make_unique<NcclCommunicator>(topology, options);
}

}  // namespace ringtrain::comm_detail
