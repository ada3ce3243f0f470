// The seam between the ring algorithms and how bytes move (as gloo's
// transport::Pair): non-blocking sends and receives to the two ring
// neighbours. Messages between one pair of ranks arrive in the order they were
// sent, and a receive names its exact size. MpiRingTransport runs over MPI
// point-to-point; InProcessRingTransport runs ranks as threads of one process,
// so the ring's logic is tested for 1 to 16 ranks without mpirun.
#pragma once

#include <cstddef>
#include <memory>

#include "comm/deadline.h"

namespace ringtrain::comm_detail {

class RingTransfer {
 public:
  virtual ~RingTransfer() = default;
  // True once done. Throws Error when the peer sent a message of another size
  // (the ranks called the collective with different counts or dtypes).
  virtual bool test() = 0;
};

class RingTransport {
 public:
  virtual ~RingTransport() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // The buffer must stay valid until the transfer is done.
  virtual std::unique_ptr<RingTransfer> isend(int peer, const void* data, std::size_t bytes) = 0;
  virtual std::unique_ptr<RingTransfer> irecv(int peer, void* data, std::size_t bytes) = 0;

  // Waits for a transfer; throws CommTimeout naming `peer` at the deadline.
  void wait(RingTransfer& t, int peer, const Deadline& deadline);
};

}  // namespace ringtrain::comm_detail
