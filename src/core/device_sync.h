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

}  // namespace ringtrain::detail
