#include "core/device_transfer.h"

#include "core/cuda/check_cuda.h"

namespace ringtrain::detail {

void cuda_copy_bytes(void* dst, const void* src, std::size_t bytes, void* event) {
  if (event != nullptr)
    RT_CUDA_CHECK(cudaStreamWaitEvent(nullptr, static_cast<cudaEvent_t>(event), 0));
  RT_CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyDefault));
  // From pageable host memory, cudaMemcpy returns once the bytes are staged,
  // possibly before the DMA into device memory ends; work on a non-blocking
  // stream (NCCL's, the compute stream) would then read stale data. Seen on an
  // H200: a one-rank all-reduce copy read half-written input.
  RT_CUDA_CHECK(cudaStreamSynchronize(nullptr));
}

}  // namespace ringtrain::detail
