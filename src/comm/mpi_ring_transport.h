// RingTransport over MPI point-to-point on a communicator of its own.
#pragma once

#include <mpi.h>

#include "comm/ring_transport.h"

namespace ringtrain::comm_detail {

class MpiRingTransport final : public RingTransport {
 public:
  // Duplicates `comm` (collective over it), so its messages never match others.
  explicit MpiRingTransport(MPI_Comm comm);
  ~MpiRingTransport() override;
  MpiRingTransport(const MpiRingTransport&) = delete;
  MpiRingTransport& operator=(const MpiRingTransport&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::unique_ptr<RingTransfer> isend(int peer, const void* data, std::size_t bytes) override;
  std::unique_ptr<RingTransfer> irecv(int peer, void* data, std::size_t bytes) override;

 private:
  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0;
  int size_ = 1;
};

}  // namespace ringtrain::comm_detail
