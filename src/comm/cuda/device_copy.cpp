#include "comm/device_copy.h"

#include "core/cuda/check_cuda.h"
#include "ringtrain/core/check.h"

namespace ringtrain::comm_detail {

void copy_view(BufferView dst, BufferView src) {
  RT_CHECK(dst.bytes() >= src.bytes(), "copy of {} bytes into a buffer of {}", src.bytes(),
           dst.bytes());
  if (src.bytes() == 0) return;
  RT_CUDA_CHECK(cudaMemcpy(dst.ptr, src.ptr, src.bytes(), cudaMemcpyDefault));
}

}  // namespace ringtrain::comm_detail
