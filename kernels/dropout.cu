#include "core/cuda/check_cuda.h"
#include "kernels/dropout.cuh"
#include "kernels/dropout.h"
#include "kernels/launch_shape.cuh"

namespace ringtrain::kernels {

namespace {
__global__ void dropout_apply_kernel(const float* __restrict__ x, float* __restrict__ y,
                                     std::size_t n, uint64_t key, float p, float keep_scale,
                                     std::size_t channels, std::size_t hw) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x)
    y[i] = x[i] * dropout_factor(key, dropout_mask_index(i, channels, hw), p, keep_scale);
}
}  // namespace

void dropout_apply_cuda(const float* x, float* y, std::size_t n, std::uint64_t key, float p,
                        float keep_scale, void* stream, std::size_t channels, std::size_t hw) {
  if (n == 0) return;
  dropout_apply_kernel<<<elementwise_blocks(n), kElementwiseThreads, 0,
                         static_cast<cudaStream_t>(stream)>>>(x, y, n, key, p, keep_scale, channels,
                                                              hw);
  RT_CUDA_CHECK_LAUNCH();
}

}  // namespace ringtrain::kernels
