// The "ring" backend: ring_algorithms.cpp over MPI point-to-point, on the
// communication thread. Works on any number of nodes.
#include <vector>

#include "comm/backends.h"
#include "comm/cpu_communicator.h"
#include "comm/mpi_ring_transport.h"
#include "comm/ring_algorithms.h"
#include "launch/mpi_context.h"

namespace ringtrain::comm_detail {

namespace {

class RingCommunicator final : public CpuCommunicator {
 public:
  RingCommunicator(const Topology& topo, const CommOptions& options)
      : CpuCommunicator(topo.rank(), topo.world_size(), options, mpi_context::local(),
                        mpi_context::world()),
        transport_(mpi_context::world()) {
    config_.chunk_bytes = options.ring_chunk_bytes;
  }
  ~RingCommunicator() override { stop_thread(); }

  std::string_view name() const override { return "ring"; }

  BufferView allocate(std::size_t count, DType dtype) override {
    storage_.emplace_back(count * dtype_size(dtype) + 64);
    return {storage_.back().data(), count, dtype, Device::cpu()};
  }

 private:
  template <typename F>
  void guarded(const OpContext& ctx, F&& f) {
    try {
      f();
    } catch (const CommTimeout& e) {
      timed_out(ctx, e.peer() >= 0 ? "rank " + std::to_string(e.peer()) : std::string(e.what()));
    }
  }
  void run_allreduce(BufferView in, BufferView out, ReduceOp op, const OpContext& ctx) override {
    guarded(ctx, [&] { ring_allreduce(transport_, in, out, op, config_, ctx.deadline, scratch_); });
  }
  void run_broadcast(BufferView in, BufferView out, int root, const OpContext& ctx) override {
    guarded(ctx, [&] { ring_broadcast(transport_, in, out, root, config_, ctx.deadline); });
  }
  void run_allgather(BufferView in, BufferView out, const OpContext& ctx) override {
    guarded(ctx, [&] { ring_allgather(transport_, in, out, config_, ctx.deadline); });
  }
  void run_reduce_scatter(BufferView in, BufferView out, ReduceOp op,
                          const OpContext& ctx) override {
    guarded(ctx,
            [&] { ring_reduce_scatter(transport_, in, out, op, config_, ctx.deadline, scratch_); });
  }
  void run_barrier(const OpContext& ctx) override {
    guarded(ctx, [&] { ring_barrier(transport_, ctx.deadline, scratch_); });
  }

  MpiRingTransport transport_;
  RingConfig config_;
  RingScratch scratch_;
  std::vector<std::vector<char>> storage_;
};

}  // namespace

std::unique_ptr<Communicator> make_ring_communicator(const Topology& topology,
                                                     const CommOptions& options) {
  return std::make_unique<RingCommunicator>(topology, options);
}

}  // namespace ringtrain::comm_detail
