// Deadlines and polite spinning for the CPU backends' waits. A wait spins
// briefly (the peer is usually a few hundred nanoseconds away), then yields the
// core (ranks may oversubscribe cores), then sleeps in short naps so that a
// long wait costs no CPU. Every wait ends at its deadline.
#pragma once

#include <sched.h>

#include <chrono>
#include <exception>
#include <thread>

#include "ringtrain/core/error.h"

namespace ringtrain::comm_detail {

// Tells, cheaply, that a peer a wait depends on has died: the wait then ends
// at once instead of at its deadline (a rank killed with SIGKILL leaves its
// peers waiting; the launcher kills them within a second or two, before any
// timeout, so the job would end without saying who was lost).
class PeerWatch {
 public:
  virtual bool peer_lost() const = 0;

 protected:
  ~PeerWatch() = default;
};

class Deadline {
 public:
  using Clock = std::chrono::steady_clock;
  explicit Deadline(double seconds, const PeerWatch* watch = nullptr)
      : seconds_(seconds),
        end_(Clock::now() +
             std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds))),
        watch_(watch) {}
  // True at the deadline, or once the watch reports a lost peer (looked at
  // every 100 ms at most, so a wait stays cheap).
  bool expired() const {
    const auto now = Clock::now();
    if (now >= end_ || lost_) return true;
    if (watch_ != nullptr && now >= next_probe_) {
      next_probe_ = now + std::chrono::milliseconds(100);
      lost_ = watch_->peer_lost();
    }
    return lost_;
  }
  double seconds() const { return seconds_; }

 private:
  double seconds_;
  Clock::time_point end_;
  const PeerWatch* watch_;
  mutable Clock::time_point next_probe_{};
  mutable bool lost_ = false;
};

// Returns true once ready() holds, false when the deadline passes first.
// nap = false for waits that drive MPI progress (a rendezvous moves one
// fragment per poll, so napping would stall it): those only yield.
template <typename Ready>
bool spin_until(Ready&& ready, const Deadline& deadline, bool nap = true) {
  for (int i = 0; i < 2000; ++i) {
    if (ready()) return true;
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
  }
  const auto start = Deadline::Clock::now();
  for (unsigned i = 0;; ++i) {
    if (ready()) return true;
    if ((i & 63u) == 0) {
      if (deadline.expired()) return ready();
      // After a millisecond of yielding, nap: the peer is late, not close.
      if (nap && Deadline::Clock::now() - start > std::chrono::milliseconds(1))
        std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
    sched_yield();
  }
}

// True while an exception propagates. A communicator destroyed then skips its
// collective teardown (MPI_Win_free, MPI_Comm_free, cancelling receives): a
// peer may be gone or in another collective, and the job is about to end
// through fatal() anyway. Freeing would risk a hang or a receive into freed
// memory.
inline bool unwinding() {
  return std::uncaught_exceptions() > 0;
}

// A wait that ran out. The communicator turns it into fatal() with the ranks
// that did not arrive; the in-process ring tests catch it.
class CommTimeout : public Error {
 public:
  CommTimeout(const std::string& what, int peer) : Error(what), peer_(peer) {}
  int peer() const { return peer_; }  // the rank waited on, or -1

 private:
  int peer_;
};

}  // namespace ringtrain::comm_detail
