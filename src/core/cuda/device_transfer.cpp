#include "core/device_transfer.h"

#include "core/cuda/check_cuda.h"

namespace ringtrain::detail {

void cuda_copy_bytes(void* dst, const void* src, std::size_t bytes, void* event) {
  if (event != nullptr)
    RT_CUDA_CHECK(cudaStreamWaitEvent(nullptr, static_cast<cudaEvent_t>(event), 0));
  RT_CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyDefault));
}

}  // namespace ringtrain::detail
