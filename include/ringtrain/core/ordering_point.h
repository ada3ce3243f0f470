// A point in a device's queue of work that other work can be ordered after
// without the host waiting: on a GPU, a CUDA event recorded on a stream (other
// streams wait for it with cudaStreamWaitEvent); on the CPU, nothing, because
// CPU work is finished when the call that did it returns.
//
// This is how the layers hand work to each other on a GPU (DESIGN.md "Ordering
// by events, never by the host"): the model records a point behind a bucket's
// gradient kernels, the communicator's stream waits on it; the communicator
// returns a point behind the all-reduce, the optimizer's stream waits on it;
// the trainer records a point behind backward, the loader waits on it before
// it refills that batch's slot. Streams are passed as void* (cudaStream_t), so
// this header stays backend-neutral.
#pragma once

#include <memory>
#include <string_view>

#include "ringtrain/core/device.h"

namespace ringtrain {

class OrderingPoint {
 public:
  OrderingPoint() = default;  // nothing to wait for
  // Behind everything queued on `stream` so far (nullptr: the legacy default
  // stream, which is behind every blocking stream). Empty on the CPU. Events come from a
  // per-process pool (no allocation per step once warm).
  static OrderingPoint record(Device device, void* stream);

  bool empty() const { return event_ == nullptr; }
  Device device() const { return device_; }
  void* event() const { return event_.get(); }  // cudaEvent_t, or nullptr

  // Makes `stream` wait for this point on the device; the host goes on.
  // Nothing to do for an empty point.
  void order_stream(void* stream) const;
  // Whether the device has passed the point, without blocking (true when
  // empty). A "not ready" poll is cleared, so it never shows up as the error
  // of a later kernel launch.
  bool reached() const;

 private:
  std::shared_ptr<void> event_;  // returned to the pool when the last copy goes
  Device device_{};
};

}  // namespace ringtrain
