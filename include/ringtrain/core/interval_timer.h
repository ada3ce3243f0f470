// Intervals of a device's queued work, timed without the host waiting between
// them (bench step --layers times every node of a model this way). On a GPU
// each interval is a pair of CUDA timing events recorded on a stream, read
// once the work is done; on the CPU, a steady clock read at each mark (CPU
// work is done when the call that did it returns). The stream is a void*
// (cudaStream_t), so this header stays backend-neutral.
#pragma once

#include <cstddef>
#include <memory>
#include <string_view>
#include <vector>

#include "ringtrain/core/device.h"

namespace ringtrain {

class IntervalTimer {
 public:
  // `intervals` slots, marked on `stream` of `device` (ignored on the CPU).
  // On a GPU the events are created here, two per slot, so that marking
  // creates nothing.
  IntervalTimer(Device device, void* stream, std::size_t intervals);
  ~IntervalTimer();
  IntervalTimer(const IntervalTimer&) = delete;
  IntervalTimer& operator=(const IntervalTimer&) = delete;

  std::size_t size() const { return marked_.size(); }
  // The start and the end of interval i, at this point of the stream's queue.
  // A slot marked again before collect() keeps its last pair.
  void start(std::size_t i);
  void stop(std::size_t i);
  // Milliseconds of each interval, after the device has done the work marked
  // so far: on a GPU one counted host sync (host_sync::wait_stream), `why`
  // naming it. A slot not marked (started and stopped) since the last
  // collect() reads 0. Clears the marks.
  std::vector<double> collect(std::string_view why);

 private:
  Device device_;
  void* stream_;
  std::vector<unsigned char> marked_;  // per slot: bit 0 started, bit 1 stopped
  std::vector<void*> events_;          // GPU: start and end per slot
  std::vector<double> start_s_, ms_;   // CPU: start time and the interval
};

}  // namespace ringtrain
