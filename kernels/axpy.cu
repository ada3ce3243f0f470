#include <algorithm>

#include "core/cuda/check_cuda.h"
#include "kernels/axpy.cuh"
#include "kernels/axpy.h"

namespace ringtrain::kernels {

namespace {
__global__ void axpy_f32_kernel(float a, const float* __restrict__ x, float* __restrict__ y,
                                std::size_t n) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x)
    y[i] = axpy_element(a, x[i], y[i]);
}
}  // namespace

void axpy_f32_cuda(float a, const float* x, float* y, std::size_t n, void* stream) {
  if (n == 0) return;
  const unsigned threads = 256;
  const unsigned blocks =
      static_cast<unsigned>(std::min<std::size_t>((n + threads - 1) / threads, 4096));
  axpy_f32_kernel<<<blocks, threads, 0, static_cast<cudaStream_t>(stream)>>>(a, x, y, n);
  RT_CUDA_CHECK_LAUNCH();
}

}  // namespace ringtrain::kernels
