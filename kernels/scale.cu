// In-place x *= factor on the GPU, arithmetic from scale.cuh.
#include "core/cuda/check_cuda.h"
#include "kernels/optim_launch.cuh"
#include "kernels/scale.cuh"
#include "kernels/scale.h"

namespace ringtrain::kernels {

namespace {
__global__ void scale_f32_kernel(float* __restrict__ x, std::size_t n, float factor) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x)
    x[i] = scale_element(x[i], factor);
}
}  // namespace

void scale_f32_cuda(float* x, std::size_t n, float factor, void* stream) {
  if (n == 0) return;
  scale_f32_kernel<<<optim_blocks(n), kOptimThreads, 0, static_cast<cudaStream_t>(stream)>>>(
      x, n, factor);
  RT_CUDA_CHECK_LAUNCH();
}

}  // namespace ringtrain::kernels
