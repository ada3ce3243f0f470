// RingTransport between threads of one process: rank r is a thread holding
// InProcessRingTransport(hub, r). A send copies into the receiver's mailbox
// and completes at once; a receive completes when the next message from that
// peer is there. For testing the ring algorithms without mpirun.
#pragma once

#include <deque>
#include <mutex>
#include <vector>

#include "comm/ring_transport.h"

namespace ringtrain::comm_detail {

class InProcessRingHub {
 public:
  explicit InProcessRingHub(int size);
  int size() const { return size_; }

 private:
  friend class InProcessRingTransport;
  struct Mailbox {
    std::mutex mutex;
    std::deque<std::vector<char>> messages;
  };
  Mailbox& mailbox(int from, int to) { return boxes_[static_cast<std::size_t>(from * size_ + to)]; }
  int size_;
  std::vector<Mailbox> boxes_;
};

class InProcessRingTransport final : public RingTransport {
 public:
  InProcessRingTransport(InProcessRingHub& hub, int rank) : hub_(hub), rank_(rank) {}
  int rank() const override { return rank_; }
  int size() const override { return hub_.size(); }
  std::unique_ptr<RingTransfer> isend(int peer, const void* data, std::size_t bytes) override;
  std::unique_ptr<RingTransfer> irecv(int peer, void* data, std::size_t bytes) override;

 private:
  InProcessRingHub& hub_;
  int rank_;
};

}  // namespace ringtrain::comm_detail
