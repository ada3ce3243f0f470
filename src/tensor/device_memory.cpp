#include "ringtrain/tensor/device_memory.h"

#include <atomic>
#include <cstdlib>
#include <cstring>

#include "ringtrain/core/check.h"
#include "ringtrain/core/host_sync.h"
#include "tensor/cuda_memory.h"

namespace ringtrain {

namespace {
constexpr std::size_t kCpuAlignment = 64;
std::atomic<std::size_t> g_device_in_use{0}, g_device_peak{0};
}  // namespace

namespace detail {
void note_device_allocated(std::size_t bytes) noexcept {
  const std::size_t now = g_device_in_use.fetch_add(bytes) + bytes;
  std::size_t peak = g_device_peak.load();
  while (now > peak && !g_device_peak.compare_exchange_weak(peak, now)) {
  }
}
void note_device_freed(std::size_t bytes) noexcept {
  g_device_in_use.fetch_sub(bytes);
}
}  // namespace detail

DeviceMemoryUse device_memory_use() {
  return {g_device_in_use.load(), g_device_peak.load()};
}

void* device_allocate(std::size_t bytes, Device device) {
  if (bytes == 0) return nullptr;
  if (device.is_cuda()) return detail::cuda_allocate(bytes, device.index);
  const std::size_t rounded = (bytes + kCpuAlignment - 1) / kCpuAlignment * kCpuAlignment;
  void* p = std::aligned_alloc(kCpuAlignment, rounded);
  RT_CHECK(p != nullptr, "out of host memory allocating {} bytes", bytes);
  return p;
}

void device_free(void* ptr, Device device) noexcept {
  if (ptr == nullptr) return;
  if (device.is_cuda())
    detail::cuda_free(ptr, device.index);
  else
    std::free(ptr);
}

void device_zero(void* ptr, std::size_t bytes, Device device) {
  if (bytes == 0) return;
  if (device.is_cuda())
    detail::cuda_zero(ptr, bytes, device.index);
  else
    std::memset(ptr, 0, bytes);
}

void device_synchronize(Device device) {
  host_sync::wait_device(device, "device_synchronize");
}

}  // namespace ringtrain
