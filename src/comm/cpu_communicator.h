// What the CPU backends (shm, ring, mpi) share: the communication thread, the
// sequence numbers that every rank assigns in the same order, the arrival
// board, and the timeout message. A backend implements the run_* functions,
// which execute one collective on whichever thread runs it.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "comm/arrival_board.h"
#include "comm/comm_thread.h"
#include "comm/deadline.h"
#include "ringtrain/comm/communicator.h"

namespace ringtrain::comm_detail {

struct OpContext {
  std::uint64_t seq = 0;
  std::string_view what;  // "allreduce", ...
  Deadline deadline;
};

class CpuCommunicator : public Communicator {
 public:
  ~CpuCommunicator() override;

  CommRequest allreduce_async(BufferView in, BufferView out, ReduceOp op) override;
  CommRequest broadcast_async(BufferView in, BufferView out, int root) override;
  CommRequest allgather_async(BufferView in, BufferView out) override;
  CommRequest reduce_scatter_async(BufferView in, BufferView out, ReduceOp op) override;
  CommRequest barrier_async() override;

  void allreduce(BufferView in, BufferView out, ReduceOp op) override;
  void broadcast(BufferView in, BufferView out, int root) override;
  void allgather(BufferView in, BufferView out) override;
  void reduce_scatter(BufferView in, BufferView out, ReduceOp op) override;
  void barrier() override;

 protected:
  CpuCommunicator(int rank, int size, const CommOptions& options, MPI_Comm node, MPI_Comm world);
  // Derived destructors call this first: no queued work may outlive their members.
  void stop_thread() { thread_.stop(); }

  virtual void run_allreduce(BufferView in, BufferView out, ReduceOp op, const OpContext& ctx) = 0;
  virtual void run_broadcast(BufferView in, BufferView out, int root, const OpContext& ctx) = 0;
  virtual void run_allgather(BufferView in, BufferView out, const OpContext& ctx) = 0;
  virtual void run_reduce_scatter(BufferView in, BufferView out, ReduceOp op,
                                  const OpContext& ctx) = 0;
  virtual void run_barrier(const OpContext& ctx) = 0;

  // Throws CommTimeout: "<backend> <what> #seq timed out after T s: rank(s)
  // 1, 3 did not arrive (waiting for <waiting_on>)".
  [[noreturn]] void timed_out(const OpContext& ctx, const std::string& waiting_on) const;

 private:
  // bytes: the payload, for the flight recorder.
  template <typename Run>
  std::function<void()> wrap(std::string_view what, std::size_t bytes, Run run);

  ArrivalBoard board_;
  std::uint64_t next_seq_ = 0;
  CommThread thread_;
};

}  // namespace ringtrain::comm_detail
