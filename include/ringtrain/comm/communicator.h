// The Communicator: collectives over every rank of the job, backend-neutral.
// Backends: "nccl" (GPU buffers, a CUDA stream), "shm" (one node's shared
// memory, hierarchical across nodes), "ring" (chunked ring over point-to-point
// messages), "mpi" (the MPI library's own collectives: the baseline).
//
// Every operation is issued in the same order on every rank. Async requests
// complete in issue order and several may be outstanding; the work runs on a
// communication thread (CPU) or stream (GPU). Every wait honours
// CommOptions::timeout_seconds: when it runs out, the job ends through
// ringtrain::fatal with a message naming the ranks that did not arrive.
//
// Semantics shared by all backends:
// - in.ptr == out.ptr means in place; otherwise in and out must not overlap.
// - avg is sum / size; on integers it truncates toward zero. The arithmetic
//   differs by backend, within the tolerances below:
//     shm, ring, mpi: f16 and bf16 are accumulated in f32 and rounded once;
//       f32 is summed in f32 (the order of the sum depends on the backend);
//       avg divides the sum once, at the end.
//     nccl: every dtype is summed in its own type, rounding at every hop of
//       the ring (f16/bf16 lose up to log2(size) ulps more than the CPU
//       backends); ncclAvg multiplies each input by 1/size before summing
//       (so an f32 avg may differ from sum/size by a few ulps, and integers
//       are divided after the sum, truncating toward zero).
// - Ordering on a GPU: order_after(point) makes the next operations start
//   only after the point (an event behind the kernels that wrote the input),
//   without blocking the host; CommRequest::completion() is a point behind the
//   operation, for the consumer's stream to wait on. CPU backends need neither
//   (their inputs are final when the call is made; wait() completes them).
// - allgather is in place when in is this rank's block of out
//   (in.ptr == out.ptr + rank * in.bytes()), reduce_scatter when out is this
//   rank's block of in: NCCL's convention.
// - A communicator is driven from one thread (the trainer's), as DDP's is.
//
// Counts that differ across ranks: shm compares every rank's descriptor (op,
// dtype, count, root) before it reads anything and fails with both values;
// ring notices a message of the wrong size (and misses a mismatch only when
// every message size happens to agree); mpi and nccl cannot detect it (MPI and
// NCCL leave it undefined), so a mismatch there gives wrong results or a
// timeout.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "ringtrain/core/buffer_view.h"
#include "ringtrain/core/device.h"
#include "ringtrain/core/ordering_point.h"

namespace ringtrain {

class Topology;

enum class ReduceOp { sum, avg, max, min };

inline constexpr ReduceOp kAllReduceOps[] = {ReduceOp::sum, ReduceOp::avg, ReduceOp::max,
                                             ReduceOp::min};
std::string_view reduce_op_name(ReduceOp op);
// Throws Error naming the value and the accepted ones.
ReduceOp parse_reduce_op(std::string_view name);

struct CommOptions {
  double timeout_seconds = 300;
  // shm only: ranks per shared-memory group. 0 = every rank of a node. A
  // smaller value splits a node into groups joined by the inter-node ring, so
  // the hierarchical path runs (and is tested) on one machine.
  int shm_group_size = 0;
  // ring only: bytes per pipelined chunk.
  std::size_t ring_chunk_bytes = std::size_t{1} << 18;
  // The name the flight recorder gives this communicator's collectives
  // ("gradients", "control"); empty: the backend's name.
  std::string flight_channel;
};

// What an async operation returns. Movable, not copyable. wait() on a request
// that already completed (or a default-constructed one) returns at once; a
// failed operation rethrows its Error from wait().
class CommRequest {
 public:
  struct RunTimes {
    double began_s = -1;
    double finished_s = -1;
  };
  // Backend-side completion state.
  class State {
   public:
    virtual ~State() = default;
    virtual bool test() = 0;
    virtual void wait() = 0;
    // A device point behind the operation, or empty where only wait() can
    // tell (CPU backends).
    virtual OrderingPoint completion() const { return {}; }
    // When the backend began and finished the operation (monotonic_seconds()),
    // once it has finished; {-1, -1} where it cannot tell (a device stream).
    // A queued operation begins after the ones before it, and a caller may see
    // its completion later than it happened.
    virtual RunTimes run_times() const { return {}; }
  };

  CommRequest() = default;
  explicit CommRequest(std::shared_ptr<State> state) : state_(std::move(state)) {}
  CommRequest(CommRequest&&) noexcept = default;
  CommRequest& operator=(CommRequest&&) noexcept = default;
  CommRequest(const CommRequest&) = delete;
  CommRequest& operator=(const CommRequest&) = delete;

  bool test() { return !state_ || state_->test(); }
  void wait() {
    if (state_) state_->wait();
  }
  // See State::completion. Empty for a default-constructed request.
  OrderingPoint completion() const { return state_ ? state_->completion() : OrderingPoint{}; }
  // See State::run_times.
  RunTimes run_times() const { return state_ ? state_->run_times() : RunTimes{}; }

 private:
  std::shared_ptr<State> state_;
};

class Communicator {
 public:
  virtual ~Communicator();
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  virtual std::string_view name() const = 0;  // "shm", "ring", "mpi", "nccl"
  int rank() const { return rank_; }
  int size() const { return size_; }
  Device device() const { return device_; }

  // The operations issued after this call start after `point` on the device
  // (nccl: the communication stream waits on the event; the host goes on).
  // The default, for backends whose inputs live in host memory, blocks the
  // host until the point is reached (a counted host sync); empty points cost
  // nothing.
  virtual void order_after(const OrderingPoint& point);

  // in.count == out.count.
  virtual CommRequest allreduce_async(BufferView in, BufferView out, ReduceOp op) = 0;
  // in is read on `root` only; every rank's out receives it. in.count == out.count.
  virtual CommRequest broadcast_async(BufferView in, BufferView out, int root) = 0;
  // out.count == in.count * size(); rank q's input lands at out[q * in.count].
  virtual CommRequest allgather_async(BufferView in, BufferView out) = 0;
  // in.count == out.count * size(); rank r receives the reduction of block r.
  virtual CommRequest reduce_scatter_async(BufferView in, BufferView out, ReduceOp op) = 0;
  virtual CommRequest barrier_async() = 0;

  // Blocking forms: the async form and a wait (a backend may run them on the
  // calling thread when nothing else is outstanding, which saves a hand-off).
  virtual void allreduce(BufferView in, BufferView out, ReduceOp op);
  virtual void broadcast(BufferView in, BufferView out, int root);
  virtual void allgather(BufferView in, BufferView out);
  virtual void reduce_scatter(BufferView in, BufferView out, ReduceOp op);
  virtual void barrier();

  // Memory this backend reduces from best: for shm a region of its shared
  // window (nothing is staged), plain host memory for ring and mpi, device
  // memory for nccl. Collective: every rank calls it in the same order with the
  // same count and dtype. Valid until the communicator is destroyed.
  virtual BufferView allocate(std::size_t count, DType dtype) = 0;

  const CommOptions& options() const { return options_; }

 protected:
  Communicator(int rank, int size, Device device, CommOptions options)
      : rank_(rank), size_(size), device_(device), options_(options) {}
  // Checks shared by every backend: devices, dtypes and counts of one rank's
  // own arguments (mismatches across ranks are each backend's business).
  void check_allreduce_args(BufferView in, BufferView out) const;
  void check_broadcast_args(BufferView in, BufferView out, int root) const;
  void check_allgather_args(BufferView in, BufferView out) const;
  void check_reduce_scatter_args(BufferView in, BufferView out) const;

 private:
  int rank_;
  int size_;
  Device device_;
  CommOptions options_;
};

// Which backend `kind` (auto | nccl | shm | ring | mpi) means: auto is nccl on
// GPU ranks unless any rank of the job shares its GPU (NCCL refuses two ranks
// on one GPU), else shm; a host backend on GPU ranks stages their buffers
// through pinned memory. nccl on a CPU rank or with shared GPUs is an Error
// naming the rank and device. Pure, so the rule is tested without GPUs.
std::string_view resolve_backend(std::string_view kind, bool gpu_rank, bool any_gpu_shared,
                                 int rank, std::string_view device);

// kind: auto | nccl | shm | ring | mpi (see resolve_backend). Collective over
// the world: the ranks first agree whether any of them shares a GPU.
std::unique_ptr<Communicator> make_communicator(std::string_view kind, const Topology& topology,
                                                const CommOptions& options = {});
// The kinds this rank can build, best first (auto excluded).
std::vector<std::string> available_backends(const Topology& topology);

}  // namespace ringtrain
