// CUDA events, stream waits and blocking waits for OrderingPoint and host_sync.
#include "core/device_sync.h"

#include <mutex>
#include <string>
#include <vector>

#include "core/cuda/check_cuda.h"

namespace ringtrain::detail {

namespace {
// Released events wait here for reuse: creating an event per collective or
// per micro-batch would allocate driver objects in the hot loop. A process
// drives one device, so one pool serves.
struct EventPool {
  std::mutex mutex;
  std::vector<cudaEvent_t> free;
};
EventPool& pool() {
  // Never destroyed: events may be released by statics torn down after the
  // runtime (the runtime frees them with the context anyway).
  static auto* p = new EventPool;
  return *p;
}

void check(cudaError_t e, std::string_view what, std::string_view why) {
  if (e != cudaSuccess)
    throw_library_error("CUDA", __FILE__, __LINE__,
                        std::string(why) + ": " + std::string(what) + ": " + cudaGetErrorString(e));
}
}  // namespace

void wait_event(void* event, std::string_view why) {
  check(cudaEventSynchronize(static_cast<cudaEvent_t>(event)), "cudaEventSynchronize", why);
}

void wait_stream(int ordinal, void* stream, std::string_view why) {
  check(cudaSetDevice(ordinal), "cudaSetDevice", why);
  check(cudaStreamSynchronize(static_cast<cudaStream_t>(stream)), "cudaStreamSynchronize", why);
}

void wait_device(int ordinal, std::string_view why) {
  check(cudaSetDevice(ordinal), "cudaSetDevice", why);
  check(cudaDeviceSynchronize(), "cudaDeviceSynchronize", why);
}

void* acquire_event() {
  {
    std::lock_guard lock(pool().mutex);
    if (!pool().free.empty()) {
      cudaEvent_t e = pool().free.back();
      pool().free.pop_back();
      return e;
    }
  }
  cudaEvent_t e = nullptr;
  RT_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  return e;
}

void release_event(void* event) noexcept {
  if (event == nullptr) return;
  std::lock_guard lock(pool().mutex);
  pool().free.push_back(static_cast<cudaEvent_t>(event));
}

void record_event(void* event, void* stream) {
  RT_CUDA_CHECK(
      cudaEventRecord(static_cast<cudaEvent_t>(event), static_cast<cudaStream_t>(stream)));
}

void stream_wait_event(void* stream, void* event) {
  RT_CUDA_CHECK(
      cudaStreamWaitEvent(static_cast<cudaStream_t>(stream), static_cast<cudaEvent_t>(event), 0));
}

bool event_reached(void* event) {
  return cuda_poll_event(static_cast<cudaEvent_t>(event));
}

void* create_timing_event() {
  cudaEvent_t e = nullptr;
  RT_CUDA_CHECK(cudaEventCreate(&e));
  return e;
}

void destroy_timing_event(void* event) noexcept {
  if (event != nullptr) (void)cudaEventDestroy(static_cast<cudaEvent_t>(event));
}

double elapsed_ms(void* start, void* end) {
  float ms = 0;
  RT_CUDA_CHECK(
      cudaEventElapsedTime(&ms, static_cast<cudaEvent_t>(start), static_cast<cudaEvent_t>(end)));
  return static_cast<double>(ms);
}

}  // namespace ringtrain::detail
