// Deadlines and polite spinning for the CPU backends' waits. A wait spins
// briefly (the peer is usually a few hundred nanoseconds away), then sleeps in
// short naps, so that a long wait costs little CPU and leaves the core to
// whatever shares it. Every wait ends at its deadline.
//
// A wait never calls sched_yield. Beside a busy thread on the same core (the
// communication thread beside backward, or compute beside an all-reduce),
// the scheduler runs the busy thread until its next tick after a yield: 4 ms
// at HZ=250, for every wait of an all-reduce. A nap's timer instead wakes the
// thread and preempts the busy one within tens of microseconds, and it hands
// the core just as well to a peer rank that shares it.
#pragma once

#include <algorithm>
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

// How a wait backs off. Both phases are bounded in time, not in polls: a poll
// that drives MPI progress (MPI_Test) costs tens of microseconds, so a fixed
// count of polls could keep a communication thread spinning for the whole
// transfer and take the core its rank computes on (ranks often share cores).
struct Backoff {
  std::chrono::microseconds spin;     // poll with a pause instruction
  std::chrono::microseconds nap;      // then poll once per nap,
  std::chrono::microseconds nap_max;  // the nap doubling up to this
};
// Shared-memory waits: the peer is a store away, and a poll costs nothing.
inline constexpr Backoff kMemoryBackoff{
    std::chrono::microseconds(20), std::chrono::microseconds(50), std::chrono::microseconds(50)};
// Waits that drive MPI progress: a message moves only while we poll, so the
// first naps are short and small messages stay fast. A long wait (a bucket on
// a slow link) naps longer, up to 160 us, so that its polls do not take the
// core from backward beside it; 160 us of a 10 Gbit/s link (200 KB) still
// fits in the socket buffers between polls. Measured in training on 2
// namespace nodes (cnn, 1 Gbit/s): 160 us gave 1908-2384 samples/s, 20 us
// 1571-1675, 640 us 1663-1927; the mlp at 10 Gbit/s lost 15-30% at 640 us.
inline constexpr Backoff kProgressBackoff{
    std::chrono::microseconds(20), std::chrono::microseconds(20), std::chrono::microseconds(160)};

// Lets this thread's naps end within about a microsecond of their time (once
// per thread; later calls return at once). The
// default timer slack of 50 us would make a 20 us nap last 70 us, and an
// all-reduce that waits once per protocol step would wait mostly on slack.
void tighten_timer_slack();

// Returns true once ready() holds, false when the deadline passes first.
template <typename Ready>
bool spin_until(Ready&& ready, const Deadline& deadline, const Backoff& backoff = kMemoryBackoff) {
  const auto start = Deadline::Clock::now();
  for (;;) {
    if (ready()) return true;
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
    if (Deadline::Clock::now() - start > backoff.spin) break;
  }
  tighten_timer_slack();
  auto nap = backoff.nap;
  for (;;) {
    if (ready()) return true;
    if (deadline.expired()) return ready();
    std::this_thread::sleep_for(nap);
    nap = std::min(2 * nap, backoff.nap_max);
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
