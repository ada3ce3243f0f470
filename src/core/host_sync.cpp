#include "ringtrain/core/host_sync.h"

#include <atomic>

#include "core/device_sync.h"

namespace ringtrain::host_sync {

namespace {
std::atomic<std::uint64_t> g_count{0};
}  // namespace

std::uint64_t count() {
  return g_count.load(std::memory_order_relaxed);
}

void note(Device, std::string_view) {
  g_count.fetch_add(1, std::memory_order_relaxed);
}

void wait(const OrderingPoint& point, std::string_view why) {
  note(point.device(), why);
  if (!point.empty()) detail::wait_event(point.event(), why);
}

void wait_stream(Device device, void* stream, std::string_view why) {
  note(device, why);
  if (device.is_cuda()) detail::wait_stream(device.index, stream, why);
}

void wait_device(Device device, std::string_view why) {
  note(device, why);
  if (device.is_cuda()) detail::wait_device(device.index, why);
}

}  // namespace ringtrain::host_sync
