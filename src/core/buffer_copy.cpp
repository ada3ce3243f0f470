#include "ringtrain/core/buffer_copy.h"

#include <cstring>

#include "core/device_transfer.h"
#include "ringtrain/core/check.h"
#include "ringtrain/core/host_sync.h"

namespace ringtrain {

void copy_view(BufferView dst, BufferView src, const OrderingPoint& after) {
  RT_CHECK(dst.dtype == src.dtype, "copy of {} elements of {} into a buffer of {}", src.count,
           dtype_name(src.dtype), dtype_name(dst.dtype));
  RT_CHECK(dst.count >= src.count, "copy of {} elements into a buffer of {} ({} to {})", src.count,
           dst.count, device_name(src.device), device_name(dst.device));
  if (src.count == 0 || dst.ptr == src.ptr) return;
  if (dst.device.is_cpu() && src.device.is_cpu()) {
    std::memcpy(dst.ptr, src.ptr, src.bytes());
    return;
  }
  // A copy to or from host memory returns when the data is there: the host
  // has waited for the device's queued work.
  if (dst.device.is_cpu() || src.device.is_cpu())
    host_sync::note(dst.device.is_cpu() ? src.device : dst.device, "copy_view");
  detail::cuda_copy_bytes(dst.ptr, src.ptr, src.bytes(), after.event());
}

}  // namespace ringtrain
