#include "core/cuda/check_cuda.h"
#include "kernels/bias.cuh"
#include "kernels/bias.h"
#include "kernels/launch_shape.cuh"

namespace ringtrain::kernels {

namespace {
constexpr unsigned kReduceThreads = 256;

__global__ void bias_add_kernel(float* __restrict__ y, const float* __restrict__ bias, std::size_t n,
                                std::size_t channels, std::size_t inner) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x)
    y[i] = bias_add_element(y[i], bias[bias_channel_of(i, channels, inner)]);
}

// One block per channel: a strided partial sum per thread, then a tree in
// shared memory.
__global__ void bias_grad_kernel(const float* __restrict__ dy, float* __restrict__ dbias,
                                 std::size_t outer, std::size_t channels, std::size_t inner,
                                 bool accumulate) {
  __shared__ float partial[kReduceThreads];
  const std::size_t c = blockIdx.x;
  const std::size_t per_channel = outer * inner;
  float sum = 0.0f;
  for (std::size_t j = threadIdx.x; j < per_channel; j += blockDim.x) {
    const std::size_t o = j / inner;
    const std::size_t i = j % inner;
    sum += dy[(o * channels + c) * inner + i];
  }
  partial[threadIdx.x] = sum;
  __syncthreads();
  for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) partial[threadIdx.x] += partial[threadIdx.x + s];
    __syncthreads();
  }
  if (threadIdx.x == 0) dbias[c] = bias_grad_combine(accumulate ? dbias[c] : 0.0f, partial[0]);
}
}  // namespace

void bias_add_cuda(float* y, const float* bias, std::size_t outer, std::size_t channels,
                   std::size_t inner, void* stream) {
  const std::size_t n = outer * channels * inner;
  if (n == 0) return;
  bias_add_kernel<<<elementwise_blocks(n), kElementwiseThreads, 0, static_cast<cudaStream_t>(stream)>>>(
      y, bias, n, channels, inner);
  RT_CUDA_CHECK_LAUNCH();
}

void bias_grad_cuda(const float* dy, float* dbias, std::size_t outer, std::size_t channels,
                    std::size_t inner, bool accumulate, void* stream) {
  if (channels == 0) return;
  bias_grad_kernel<<<static_cast<unsigned>(channels), kReduceThreads, 0,
                     static_cast<cudaStream_t>(stream)>>>(dy, dbias, outer, channels, inner, accumulate);
  RT_CUDA_CHECK_LAUNCH();
}

}  // namespace ringtrain::kernels
