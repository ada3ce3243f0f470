// The "mpi" backend: the MPI library's own non-blocking collectives, as they
// are. It is the baseline that shm and ring are measured against. The waits
// poll MPI_Test against the timeout, so a missing rank ends the job instead of
// hanging it. f16/bf16 have no MPI type: they are widened to f32, reduced and
// rounded once.
//
// Mismatched counts across ranks: MPI's collectives cannot detect them (the
// standard makes them undefined); use shm or ring, which check.
#include <climits>
#include <cstring>
#include <vector>

#include "comm/backends.h"
#include "comm/cpu_communicator.h"
#include "comm/elementwise_reduce.h"
#include "core/check_mpi.h"
#include "launch/mpi_context.h"
#include "ringtrain/core/check.h"

namespace ringtrain::comm_detail {

namespace {

MPI_Datatype mpi_type(DType t) {
  switch (t) {
    case DType::f32:
      return MPI_FLOAT;
    case DType::f64:
      return MPI_DOUBLE;
    case DType::f16:
    case DType::bf16:
      return MPI_UINT16_T;
    case DType::i32:
      return MPI_INT32_T;
    case DType::i64:
      return MPI_INT64_T;
  }
  return MPI_BYTE;
}

MPI_Op mpi_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum:
    case ReduceOp::avg:
      return MPI_SUM;
    case ReduceOp::max:
      return MPI_MAX;
    case ReduceOp::min:
      return MPI_MIN;
  }
  return MPI_SUM;
}

int mpi_count(std::size_t count, std::string_view what) {
  RT_CHECK(count <= static_cast<std::size_t>(INT_MAX),
           "{} on 'mpi': {} elements exceed MPI's int count; use shm or ring", what, count);
  return static_cast<int>(count);
}

class MpiCommunicator final : public CpuCommunicator {
 public:
  MpiCommunicator(const Topology& topo, const CommOptions& options, MPI_Comm comm)
      : CpuCommunicator(topo.rank(), topo.world_size(), options, mpi_context::local(),
                        mpi_context::world()),
        comm_(comm) {}
  ~MpiCommunicator() override {
    stop_thread();
    if (!unwinding()) MPI_Comm_free(&comm_);
  }

  std::string_view name() const override { return "mpi"; }

  BufferView allocate(std::size_t count, DType dtype) override {
    storage_.emplace_back(count * dtype_size(dtype) + 64);
    return {storage_.back().data(), count, dtype, Device::cpu()};
  }

 private:
  void finish(MPI_Request& req, const OpContext& ctx, const char* call) {
    int flag = 0;
    int rc = MPI_SUCCESS;
    const bool done = spin_until(
        [&] {
          rc = MPI_Test(&req, &flag, MPI_STATUS_IGNORE);
          return rc != MPI_SUCCESS || flag != 0;
        },
        ctx.deadline, kProgressBackoff);
    RT_MPI_CHECK(rc);
    if (!done) timed_out(ctx, call);
  }

  void run_allreduce(BufferView in, BufferView out, ReduceOp op, const OpContext& ctx) override {
    const int n = mpi_count(in.count, "allreduce");
    MPI_Request req;
    if (is_16bit_float(in.dtype)) {
      wide_.resize(in.count);
      widen_to_f32(in.dtype, in.ptr, wide_.data(), in.count);
      RT_MPI_CHECK(
          MPI_Iallreduce(MPI_IN_PLACE, wide_.data(), n, MPI_FLOAT, mpi_op(op), comm_, &req));
      finish(req, ctx, "MPI_Iallreduce");
      if (op == ReduceOp::avg) divide(DType::f32, wide_.data(), in.count, size());
      narrow_from_f32(in.dtype, wide_.data(), out.ptr, in.count);
      return;
    }
    const void* send = in.ptr == out.ptr ? MPI_IN_PLACE : in.ptr;
    RT_MPI_CHECK(MPI_Iallreduce(send, out.ptr, n, mpi_type(in.dtype), mpi_op(op), comm_, &req));
    finish(req, ctx, "MPI_Iallreduce");
    if (op == ReduceOp::avg) divide(in.dtype, out.ptr, out.count, size());
  }

  void run_broadcast(BufferView in, BufferView out, int root, const OpContext& ctx) override {
    const int n = mpi_count(out.count, "broadcast");
    if (rank() == root && in.ptr != out.ptr && out.count > 0)
      std::memcpy(out.ptr, in.ptr, out.bytes());
    MPI_Request req;
    RT_MPI_CHECK(MPI_Ibcast(out.ptr, n, mpi_type(out.dtype), root, comm_, &req));
    finish(req, ctx, "MPI_Ibcast");
  }

  void run_allgather(BufferView in, BufferView out, const OpContext& ctx) override {
    const int n = mpi_count(in.count, "allgather");
    (void)mpi_count(out.count, "allgather");
    // In place (NCCL's convention): the input is already this rank's block of out.
    const bool in_place =
        in.ptr == static_cast<char*>(out.ptr) + static_cast<std::size_t>(rank()) * in.bytes();
    MPI_Request req;
    const MPI_Datatype t = mpi_type(in.dtype);
    RT_MPI_CHECK(
        MPI_Iallgather(in_place ? MPI_IN_PLACE : in.ptr, n, t, out.ptr, n, t, comm_, &req));
    finish(req, ctx, "MPI_Iallgather");
  }

  void run_reduce_scatter(BufferView in, BufferView out, ReduceOp op,
                          const OpContext& ctx) override {
    const int n = mpi_count(out.count, "reduce_scatter");
    (void)mpi_count(in.count, "reduce_scatter");
    MPI_Request req;
    if (is_16bit_float(in.dtype)) {
      wide_.resize(in.count + out.count);
      widen_to_f32(in.dtype, in.ptr, wide_.data(), in.count);
      float* result = wide_.data() + in.count;
      RT_MPI_CHECK(
          MPI_Ireduce_scatter_block(wide_.data(), result, n, MPI_FLOAT, mpi_op(op), comm_, &req));
      finish(req, ctx, "MPI_Ireduce_scatter_block");
      if (op == ReduceOp::avg) divide(DType::f32, result, out.count, size());
      narrow_from_f32(in.dtype, result, out.ptr, out.count);
      return;
    }
    // In place (NCCL's convention): out is this rank's block of in.
    const bool in_place =
        out.ptr == static_cast<char*>(in.ptr) + static_cast<std::size_t>(rank()) * out.bytes();
    if (in_place) {
      scratch_.resize(out.bytes());
      RT_MPI_CHECK(MPI_Ireduce_scatter_block(in.ptr, scratch_.data(), n, mpi_type(in.dtype),
                                             mpi_op(op), comm_, &req));
    } else {
      RT_MPI_CHECK(MPI_Ireduce_scatter_block(in.ptr, out.ptr, n, mpi_type(in.dtype), mpi_op(op),
                                             comm_, &req));
    }
    finish(req, ctx, "MPI_Ireduce_scatter_block");
    if (in_place && out.count > 0) std::memcpy(out.ptr, scratch_.data(), out.bytes());
    if (op == ReduceOp::avg) divide(in.dtype, out.ptr, out.count, size());
  }

  void run_barrier(const OpContext& ctx) override {
    MPI_Request req;
    RT_MPI_CHECK(MPI_Ibarrier(comm_, &req));
    finish(req, ctx, "MPI_Ibarrier");
  }

  MPI_Comm comm_;
  std::vector<float> wide_;
  std::vector<char> scratch_;
  std::vector<std::vector<char>> storage_;
};

}  // namespace

std::unique_ptr<Communicator> make_mpi_communicator(const Topology& topology,
                                                    const CommOptions& options) {
  MPI_Comm comm = MPI_COMM_NULL;
  RT_MPI_CHECK(MPI_Comm_dup(mpi_context::world(), &comm));
  MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
  return std::make_unique<MpiCommunicator>(topology, options, comm);
}

}  // namespace ringtrain::comm_detail
