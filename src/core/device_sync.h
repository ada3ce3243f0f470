// The blocking primitives behind host_sync and OrderingPoint, without CUDA
// types: src/core/cuda/device_sync.cpp implements them with the CUDA runtime,
// device_sync_nocuda.cpp answers a CUDA request with an Error.
#pragma once

#include <string_view>

namespace ringtrain::detail {

void wait_event(void* event, std::string_view why);
void wait_stream(int ordinal, void* stream, std::string_view why);
void wait_device(int ordinal, std::string_view why);

// The event pool: a cudaEvent_t (timing disabled) on the current device.
void* acquire_event();
void release_event(void* event) noexcept;
void record_event(void* event, void* stream);
void stream_wait_event(void* stream, void* event);
bool event_reached(void* event);

// Timing events (IntervalTimer, bench step --layers): a cudaEvent_t with
// timing on the current device, owned by the caller (not pooled: the pool's
// events have timing off, which is what makes them cheap to record and wait).
void* create_timing_event();
void destroy_timing_event(void* event) noexcept;
// Milliseconds between two recorded timing events that the device has passed.
double elapsed_ms(void* start, void* end);

}  // namespace ringtrain::detail
