// Rounding to the bf16/fp16 grid on the GPU, arithmetic from precision.cuh.
#include "core/cuda/check_cuda.h"
#include "kernels/optim_launch.cuh"
#include "kernels/precision.cuh"
#include "kernels/precision.h"

namespace ringtrain::kernels {

namespace {
__global__ void round_to_precision_kernel(float* y, const float* x, std::size_t n, int precision) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x)
    y[i] = round_to_precision_grid(x[i], precision);
}
__global__ void to_precision_bits_kernel(std::uint16_t* y, const float* x, std::size_t n,
                                         int precision) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x)
    y[i] = to_precision_bits(x[i], precision);
}
__global__ void from_precision_bits_kernel(float* y, const std::uint16_t* x, std::size_t n,
                                           int precision) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x)
    y[i] = from_precision_bits(x[i], precision);
}
}  // namespace

void round_to_precision_cuda(float* y, const float* x, std::size_t n, int precision, void* stream) {
  if (n == 0) return;
  round_to_precision_kernel<<<optim_blocks(n), kOptimThreads, 0,
                              static_cast<cudaStream_t>(stream)>>>(y, x, n, precision);
  RT_CUDA_CHECK_LAUNCH();
}

void to_precision_bits_cuda(std::uint16_t* y, const float* x, std::size_t n, int precision,
                            void* stream) {
  if (n == 0) return;
  to_precision_bits_kernel<<<optim_blocks(n), kOptimThreads, 0,
                             static_cast<cudaStream_t>(stream)>>>(y, x, n, precision);
  RT_CUDA_CHECK_LAUNCH();
}

void from_precision_bits_cuda(float* y, const std::uint16_t* x, std::size_t n, int precision,
                              void* stream) {
  if (n == 0) return;
  from_precision_bits_kernel<<<optim_blocks(n), kOptimThreads, 0,
                               static_cast<cudaStream_t>(stream)>>>(y, x, n, precision);
  RT_CUDA_CHECK_LAUNCH();
}

}  // namespace ringtrain::kernels
