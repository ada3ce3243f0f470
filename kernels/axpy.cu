#include <algorithm>

#include "core/cuda/check_cuda.h"
#include "kernels/axpy.cuh"
#include "kernels/axpy.h"
#include "kernels/precision.cuh"

namespace ringtrain::kernels {

namespace {
__global__ void axpy_f32_kernel(float a, const float* __restrict__ x, float* __restrict__ y,
                                std::size_t n) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x)
    y[i] = axpy_element(a, x[i], y[i]);
}
__global__ void axpy_rounded_f32_kernel(float a, const float* __restrict__ x,
                                        const float* __restrict__ y, float* __restrict__ out,
                                        std::size_t n, DType precision) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x)
    out[i] = round_to_precision_grid(axpy_element(a, x[i], y[i]), precision);
}
unsigned axpy_blocks(std::size_t n, unsigned threads) {
  return static_cast<unsigned>(std::min<std::size_t>((n + threads - 1) / threads, 4096));
}
}  // namespace

void axpy_f32_cuda(float a, const float* x, float* y, std::size_t n, void* stream) {
  if (n == 0) return;
  const unsigned threads = 256;
  axpy_f32_kernel<<<axpy_blocks(n, threads), threads, 0, static_cast<cudaStream_t>(stream)>>>(a, x,
                                                                                              y, n);
  RT_CUDA_CHECK_LAUNCH();
}

void axpy_rounded_f32_cuda(float a, const float* x, const float* y, float* out, std::size_t n,
                           DType precision, void* stream) {
  if (n == 0) return;
  const unsigned threads = 256;
  axpy_rounded_f32_kernel<<<axpy_blocks(n, threads), threads, 0,
                            static_cast<cudaStream_t>(stream)>>>(a, x, y, out, n, precision);
  RT_CUDA_CHECK_LAUNCH();
}

}  // namespace ringtrain::kernels
