// CPU-only build: a copy that involves a GPU is an Error.
#include "core/device_transfer.h"
#include "ringtrain/core/check.h"

namespace ringtrain::detail {

void cuda_copy_bytes(void*, const void*, std::size_t, void*) {
  RT_CHECK(false, "copy to or from a CUDA device: ringtrain was built without CUDA");
}

}  // namespace ringtrain::detail
