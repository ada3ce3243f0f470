// A batch of stored bytes widened to the model's floats on the GPU, after the
// loader copied the bytes across; arithmetic from widen_bytes.cuh, the same
// function the CPU loader threads run.
#include "core/cuda/check_cuda.h"
#include "kernels/optim_launch.cuh"
#include "kernels/widen_bytes.cuh"
#include "kernels/widen_bytes.h"

namespace ringtrain::kernels {

namespace {
__global__ void widen_bytes_kernel(const std::uint8_t* __restrict__ in, float* __restrict__ out,
                                   std::size_t n, ChannelWidening w) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x)
    out[i] = widen_element(in, i, w);
}
}  // namespace

void widen_bytes_cuda(const std::uint8_t* in, float* out, std::size_t n, const ChannelWidening& w,
                      void* stream) {
  if (n == 0) return;
  widen_bytes_kernel<<<optim_blocks(n), kOptimThreads, 0, static_cast<cudaStream_t>(stream)>>>(
      in, out, n, w);
  RT_CUDA_CHECK_LAUNCH();
}

}  // namespace ringtrain::kernels
