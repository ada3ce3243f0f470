#include <cstring>

#include "comm/device_copy.h"
#include "ringtrain/core/check.h"

namespace ringtrain::comm_detail {

void copy_view(BufferView dst, BufferView src) {
  RT_CHECK(dst.device.is_cpu() && src.device.is_cpu(),
           "copy to/from {}: this ringtrain was built without CUDA",
           device_name(dst.device.is_cpu() ? src.device : dst.device));
  RT_CHECK(dst.bytes() >= src.bytes(), "copy of {} bytes into a buffer of {}", src.bytes(),
           dst.bytes());
  if (src.bytes() > 0) std::memcpy(dst.ptr, src.ptr, src.bytes());
}

}  // namespace ringtrain::comm_detail
