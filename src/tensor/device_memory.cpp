#include "ringtrain/tensor/device_memory.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <mutex>
#include <set>
#include <vector>

#include "ringtrain/core/check.h"
#include "ringtrain/core/host_sync.h"
#include "tensor/cuda_memory.h"

namespace ringtrain {

namespace {
constexpr std::size_t kCpuAlignment = 64;
// The live allocations' sizes and the largest of them at the peak. Device
// allocations happen when models and workspaces are built, not per step: a
// lock costs nothing that matters.
struct DeviceAccounting {
  std::mutex mutex;
  std::size_t in_use = 0, peak = 0;
  std::multiset<std::size_t, std::greater<>> live;
  std::vector<std::size_t> largest_at_peak;
};
DeviceAccounting& accounting() {
  static auto* a = new DeviceAccounting();  // outlives static tensors freed at exit
  return *a;
}
}  // namespace

namespace detail {
void note_device_allocated(std::size_t bytes) noexcept {
  DeviceAccounting& a = accounting();
  const std::lock_guard lock(a.mutex);
  a.in_use += bytes;
  try {
    a.live.insert(bytes);
    if (a.in_use > a.peak) {
      a.peak = a.in_use;
      a.largest_at_peak.clear();
      for (const std::size_t b : a.live) {
        if (a.largest_at_peak.size() == kPeakAllocationsKept) break;
        a.largest_at_peak.push_back(b);
      }
    }
  } catch (...) {  // out of host memory: the sizes go unlisted, the totals stay right
    a.peak = std::max(a.peak, a.in_use);
  }
}
void note_device_freed(std::size_t bytes) noexcept {
  DeviceAccounting& a = accounting();
  const std::lock_guard lock(a.mutex);
  a.in_use -= std::min(bytes, a.in_use);
  if (const auto it = a.live.find(bytes); it != a.live.end()) a.live.erase(it);
}
}  // namespace detail

DeviceMemoryUse device_memory_use() {
  DeviceAccounting& a = accounting();
  const std::lock_guard lock(a.mutex);
  return {a.in_use, a.peak, a.largest_at_peak};
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
