// IntervalTimer: CUDA timing events on a GPU (core/device_sync.h), a steady
// clock on the CPU.
#include "ringtrain/core/interval_timer.h"

#include <algorithm>

#include "core/device_sync.h"
#include "ringtrain/core/check.h"
#include "ringtrain/core/host_sync.h"
#include "ringtrain/core/timer.h"

namespace ringtrain {

namespace {
constexpr unsigned char kStarted = 1, kStopped = 2;
}  // namespace

IntervalTimer::IntervalTimer(Device device, void* stream, std::size_t intervals)
    : device_(device), stream_(stream), marked_(intervals, 0) {
  if (device.is_cuda()) {
    events_.reserve(2 * intervals);
    try {
      for (std::size_t k = 0; k < 2 * intervals; ++k)
        events_.push_back(detail::create_timing_event());
    } catch (...) {
      for (void* e : events_) detail::destroy_timing_event(e);
      throw;
    }
  } else {
    start_s_.assign(intervals, 0.0);
    ms_.assign(intervals, 0.0);
  }
}

IntervalTimer::~IntervalTimer() {
  for (void* e : events_) detail::destroy_timing_event(e);
}

void IntervalTimer::start(std::size_t i) {
  RT_CHECK(i < size(), "interval {} out of range (the timer has {})", i, size());
  marked_[i] = kStarted;
  if (device_.is_cuda())
    detail::record_event(events_[2 * i], stream_);
  else
    start_s_[i] = monotonic_seconds();
}

void IntervalTimer::stop(std::size_t i) {
  RT_CHECK(i < size(), "interval {} out of range (the timer has {})", i, size());
  RT_CHECK(marked_[i] & kStarted, "interval {} stopped before it was started", i);
  marked_[i] |= kStopped;
  if (device_.is_cuda())
    detail::record_event(events_[2 * i + 1], stream_);
  else
    ms_[i] = 1e3 * (monotonic_seconds() - start_s_[i]);
}

std::vector<double> IntervalTimer::collect(std::string_view why) {
  std::vector<double> out(size(), 0.0);
  const bool any = std::any_of(marked_.begin(), marked_.end(),
                               [](unsigned char m) { return m == (kStarted | kStopped); });
  if (device_.is_cuda() && any) host_sync::wait_stream(device_, stream_, why);
  for (std::size_t i = 0; i < size(); ++i) {
    if (marked_[i] != (kStarted | kStopped)) continue;
    out[i] = device_.is_cuda() ? detail::elapsed_ms(events_[2 * i], events_[2 * i + 1]) : ms_[i];
  }
  std::fill(marked_.begin(), marked_.end(), 0);
  return out;
}

}  // namespace ringtrain
