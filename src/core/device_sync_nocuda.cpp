// CPU-only build: there are no events or streams; a CUDA request is an Error.
#include "core/device_sync.h"

#include "ringtrain/core/check.h"

namespace ringtrain::detail {

namespace {
[[noreturn]] void no_cuda(std::string_view why) {
  RT_CHECK(false, "{}: a CUDA device was asked for, but ringtrain was built without CUDA", why);
}
}  // namespace

void wait_event(void*, std::string_view why) {
  no_cuda(why);
}
void wait_stream(int, void*, std::string_view why) {
  no_cuda(why);
}
void wait_device(int, std::string_view why) {
  no_cuda(why);
}
void* acquire_event() {
  no_cuda("CUDA event");
}
void release_event(void*) noexcept {}
void record_event(void*, void*) {
  no_cuda("CUDA event");
}
void stream_wait_event(void*, void*) {
  no_cuda("CUDA event");
}
bool event_reached(void*) {
  no_cuda("CUDA event");
}
void* create_timing_event() {
  no_cuda("CUDA timing event");
}
void destroy_timing_event(void*) noexcept {}
double elapsed_ms(void*, void*) {
  no_cuda("CUDA timing event");
}

}  // namespace ringtrain::detail
