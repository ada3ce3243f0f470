#include "comm/in_process_ring_transport.h"

#include <cstring>

#include "ringtrain/core/check.h"

namespace ringtrain::comm_detail {

InProcessRingHub::InProcessRingHub(int size)
    : size_(size), boxes_(static_cast<std::size_t>(size) * static_cast<std::size_t>(size)) {
  RT_CHECK(size >= 1, "in-process ring needs at least one rank, got {}", size);
}

namespace {

class DoneTransfer final : public RingTransfer {
 public:
  bool test() override { return true; }
};

class MailboxReceive final : public RingTransfer {
 public:
  MailboxReceive(std::mutex& m, std::deque<std::vector<char>>& q, int peer, void* data,
                 std::size_t bytes)
      : mutex_(m), messages_(q), peer_(peer), data_(data), bytes_(bytes) {}
  bool test() override {
    if (done_) return true;
    std::vector<char> msg;
    {
      std::lock_guard lock(mutex_);
      if (messages_.empty()) return false;
      msg = std::move(messages_.front());
      messages_.pop_front();
    }
    done_ = true;
    RT_CHECK(msg.size() == bytes_,
             "ring: rank {} sent a message of {} bytes where {} bytes were expected: the ranks "
             "called the collective with different counts, dtypes or roots",
             peer_, msg.size(), bytes_);
    if (bytes_ > 0) std::memcpy(data_, msg.data(), bytes_);
    return true;
  }

 private:
  std::mutex& mutex_;
  std::deque<std::vector<char>>& messages_;
  int peer_;
  void* data_;
  std::size_t bytes_;
  bool done_ = false;
};

}  // namespace

std::unique_ptr<RingTransfer> InProcessRingTransport::isend(int peer, const void* data,
                                                            std::size_t bytes) {
  auto& box = hub_.mailbox(rank_, peer);
  std::vector<char> msg(static_cast<const char*>(data), static_cast<const char*>(data) + bytes);
  {
    std::lock_guard lock(box.mutex);
    box.messages.push_back(std::move(msg));
  }
  return std::make_unique<DoneTransfer>();
}

std::unique_ptr<RingTransfer> InProcessRingTransport::irecv(int peer, void* data,
                                                            std::size_t bytes) {
  auto& box = hub_.mailbox(peer, rank_);
  return std::make_unique<MailboxReceive>(box.mutex, box.messages, peer, data, bytes);
}

}  // namespace ringtrain::comm_detail
