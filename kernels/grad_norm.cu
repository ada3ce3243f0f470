// Sum of squares of an f32 buffer in double, in two deterministic passes:
// each block reduces its grid-stride share into partials[block], then one
// block sums the partials in a fixed tree order into scratch[0].
#include <algorithm>

#include "core/cuda/check_cuda.h"
#include "kernels/grad_norm.cuh"
#include "kernels/grad_norm.h"

namespace ringtrain::kernels {

namespace {

constexpr unsigned kPartialThreads = 256;
constexpr unsigned kFinalThreads = static_cast<unsigned>(kSumSquaresMaxBlocks);

// Tree reduction over shared memory; `threads` is a power of two.
template <unsigned threads>
__device__ double block_sum(double value, double* shared) {
  shared[threadIdx.x] = value;
  __syncthreads();
  for (unsigned half = threads / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) shared[threadIdx.x] += shared[threadIdx.x + half];
    __syncthreads();
  }
  return shared[0];
}

__global__ void sum_squares_partial_kernel(const float* __restrict__ x, std::size_t n,
                                           double* __restrict__ partials) {
  __shared__ double shared[kPartialThreads];
  double sum = 0.0;
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x)
    sum += squared_as_double(x[i]);
  const double total = block_sum<kPartialThreads>(sum, shared);
  if (threadIdx.x == 0) partials[blockIdx.x] = total;
}

__global__ void sum_partials_kernel(const double* __restrict__ partials, unsigned count,
                                    double* __restrict__ result) {
  __shared__ double shared[kFinalThreads];
  const double value = threadIdx.x < count ? partials[threadIdx.x] : 0.0;
  const double total = block_sum<kFinalThreads>(value, shared);
  if (threadIdx.x == 0) *result = total;
}

}  // namespace

void sum_squares_f32_cuda(const float* x, std::size_t n, double* scratch, void* stream) {
  const cudaStream_t s = static_cast<cudaStream_t>(stream);
  const unsigned blocks = static_cast<unsigned>(std::clamp<std::size_t>(
      (n + kPartialThreads - 1) / kPartialThreads, 1, kSumSquaresMaxBlocks));
  sum_squares_partial_kernel<<<blocks, kPartialThreads, 0, s>>>(x, n, scratch + 1);
  RT_CUDA_CHECK_LAUNCH();
  sum_partials_kernel<<<1, kFinalThreads, 0, s>>>(scratch + 1, blocks, scratch);
  RT_CUDA_CHECK_LAUNCH();
}

}  // namespace ringtrain::kernels
