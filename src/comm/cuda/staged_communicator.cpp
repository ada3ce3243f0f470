// GPU buffers reduced by a CPU backend, staged through pinned host memory. This
// is what ranks that share one GPU use (--allow-gpu-sharing): NCCL refuses two
// ranks of one communicator on the same GPU, so `auto` picks shm, and device
// buffers travel D2H, through the host collective, and back H2D. It also lets
// any CPU backend be named for GPU ranks, e.g. to compare with NCCL.
//
// Each operation runs on a communication thread, in issue order: wait for the
// producer's ordering point, copy the input to pinned memory on a copy stream
// of its own and wait for it, run the host collective, copy the result back
// and wait for it. The copies are host waits, counted by host_sync, on that
// thread; requests have no device completion point, so the consumer waits on
// the host (GradientSynchronizer::finish), after which the result is in place.
#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <mutex>

#include "comm/backends.h"
#include "comm/comm_thread.h"
#include "core/cuda/check_cuda.h"
#include "ringtrain/core/check.h"
#include "ringtrain/core/host_sync.h"

namespace ringtrain::comm_detail {

namespace {

// Where a device view's bytes sit in the staging buffer.
struct StagedPair {
  BufferView in, out;  // host views (CPU device) for the inner collective
};

class StagedCommunicator final : public Communicator {
 public:
  StagedCommunicator(const Topology& topology, std::string_view inner_kind,
                     const CommOptions& options)
      : Communicator(topology.rank(), topology.world_size(), topology.device(), options),
        inner_(make_host_backend(inner_kind, topology.on_host(), options)),
        thread_(options.timeout_seconds) {
    RT_CUDA_CHECK(cudaSetDevice(device().index));
    RT_CUDA_CHECK(cudaStreamCreateWithFlags(&copy_stream_, cudaStreamNonBlocking));
  }

  ~StagedCommunicator() override {
    thread_.stop();
    for (void* p : allocations_) cudaFree(p);
    if (staging_) cudaFreeHost(staging_);
    if (copy_stream_) cudaStreamDestroy(copy_stream_);
  }

  std::string_view name() const override { return inner_->name(); }

  void order_after(const OrderingPoint& point) override {
    std::lock_guard lock(mutex_);
    pending_after_ = point;
  }

  CommRequest allreduce_async(BufferView in, BufferView out, ReduceOp op) override {
    check_allreduce_args(in, out);
    return submit("allreduce", in, out,
                  [this, op](StagedPair p) { inner_->allreduce(p.in, p.out, op); });
  }
  CommRequest broadcast_async(BufferView in, BufferView out, int root) override {
    check_broadcast_args(in, out, root);
    if (rank() != root) in = out;
    return submit("broadcast", in, out,
                  [this, root](StagedPair p) { inner_->broadcast(p.in, p.out, root); });
  }
  CommRequest allgather_async(BufferView in, BufferView out) override {
    check_allgather_args(in, out);
    return submit("allgather", in, out, [this](StagedPair p) { inner_->allgather(p.in, p.out); });
  }
  CommRequest reduce_scatter_async(BufferView in, BufferView out, ReduceOp op) override {
    check_reduce_scatter_args(in, out);
    return submit("reduce_scatter", in, out,
                  [this, op](StagedPair p) { inner_->reduce_scatter(p.in, p.out, op); });
  }
  CommRequest barrier_async() override {
    return thread_.submit("barrier", [this] { inner_->barrier(); });
  }

  BufferView allocate(std::size_t count, DType dtype) override {
    void* p = nullptr;
    RT_CUDA_CHECK(cudaSetDevice(device().index));
    RT_CUDA_CHECK(cudaMalloc(&p, std::max<std::size_t>(count * dtype_size(dtype), 256)));
    allocations_.push_back(p);
    return {p, count, dtype, device()};
  }

 private:
  static std::unique_ptr<Communicator> make_host_backend(std::string_view kind,
                                                         const Topology& host,
                                                         const CommOptions& options) {
    if (kind == "ring") return make_ring_communicator(host, options);
    if (kind == "mpi") return make_mpi_communicator(host, options);
    return make_shm_communicator(host, options);
  }

  template <typename Op>
  CommRequest submit(const char* what, BufferView in, BufferView out, Op op) {
    OrderingPoint after;
    {
      std::lock_guard lock(mutex_);
      after = std::move(pending_after_);
      pending_after_ = {};
    }
    return thread_.submit(fmt::format("{} (staged through host memory)", what),
                          [this, what, in, out, op, after] {
                            RT_CUDA_CHECK(cudaSetDevice(device().index));
                            host_sync::wait(after, what);
                            op(stage(in, out));
                            unstage(out);
                          });
  }

  // One region of the staging buffer covers both views when they overlap (in
  // place, or the in-place conventions of allgather and reduce_scatter), else
  // two regions. The input is copied in; the output is copied back by unstage.
  StagedPair stage(BufferView in, BufferView out) {
    const auto* in_b = static_cast<const char*>(in.ptr);
    const auto* out_b = static_cast<const char*>(out.ptr);
    const bool overlap = in_b < out_b + out.bytes() && out_b < in_b + in.bytes();
    const char* base = overlap ? std::min(in_b, out_b) : nullptr;
    const std::size_t union_bytes =
        overlap ? static_cast<std::size_t>(std::max(in_b + in.bytes(), out_b + out.bytes()) - base)
                : 0;
    const std::size_t out_offset = overlap ? 0 : round_up(in.bytes());
    reserve(overlap ? union_bytes : out_offset + out.bytes());
    char* host = static_cast<char*>(staging_);
    StagedPair p;
    if (overlap) {
      p.in = {host + (in_b - base), in.count, in.dtype, Device::cpu()};
      p.out = {host + (out_b - base), out.count, out.dtype, Device::cpu()};
    } else {
      p.in = {host, in.count, in.dtype, Device::cpu()};
      p.out = {host + out_offset, out.count, out.dtype, Device::cpu()};
    }
    staged_out_ = p.out;
    copy(p.in.ptr, in.ptr, in.bytes(), cudaMemcpyDeviceToHost, "copy the input to the host");
    return p;
  }

  void unstage(BufferView out) {
    copy(out.ptr, staged_out_.ptr, out.bytes(), cudaMemcpyHostToDevice,
         "copy the result to the device");
  }

  void copy(void* dst, const void* src, std::size_t bytes, cudaMemcpyKind kind, const char* why) {
    if (bytes == 0) return;
    RT_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, kind, copy_stream_));
    host_sync::wait_stream(device(), copy_stream_, why);
  }

  static std::size_t round_up(std::size_t bytes) { return (bytes + 255) / 256 * 256; }

  // Grows the pinned buffer; only the first step of a run allocates.
  void reserve(std::size_t bytes) {
    if (bytes <= staging_bytes_) return;
    if (staging_) RT_CUDA_CHECK(cudaFreeHost(staging_));
    staging_ = nullptr;
    RT_CUDA_CHECK(cudaMallocHost(&staging_, bytes));
    staging_bytes_ = bytes;
  }

  std::unique_ptr<Communicator> inner_;
  CommThread thread_;
  cudaStream_t copy_stream_ = nullptr;
  std::mutex mutex_;
  OrderingPoint pending_after_;
  void* staging_ = nullptr;  // touched by the communication thread only
  std::size_t staging_bytes_ = 0;
  BufferView staged_out_;
  std::vector<void*> allocations_;
};

}  // namespace

std::unique_ptr<Communicator> make_staged_communicator(std::string_view inner_kind,
                                                       const Topology& topology,
                                                       const CommOptions& options) {
  return std::make_unique<StagedCommunicator>(topology, inner_kind, options);
}

}  // namespace ringtrain::comm_detail
