// Bias forward and backward on a GPU.
//
// Forward: an elementwise add (grid-stride; 32-bit index arithmetic without a
// division when the element count allows, kernels/fast_divide.cuh). Fusing it into the producer
// instead (a cuBLASLt CUBLASLT_EPILOGUE_BIAS for Linear, cuDNN's conv-bias-activation for Conv2d)
// saves one pass over the output, a few microseconds for these models, at the
// price of a second GEMM path with its own plans and heuristics beside
// cublasSgemm; not worth it until a profile says so.
//
// Backward: our own two-pass reduction rather than the libraries. cuBLAS GEMV
// with a ones vector (dbias = dy^T 1) would be as fast for Linear, but under
// --tf32 on cuBLAS may round dy to TF32 and it needs a ones vector per batch
// size; cudnnConvolutionBackwardBias is legacy API with no determinism
// promise. The kernels below cover both layouts with one scheme
// (kernels/bias.cuh): thread blocks over (channel group, row slice), each
// summing in a fixed order, then an ordered sum of the slices' partials. No
// float atomics, so the gradient is bit-for-bit repeatable. Enough blocks for
// the whole GPU: e.g. a conv with 32 channels at batch 512 of 28x28 maps (12.8
// M floats) runs as 32 x 16 blocks, where one block per channel would leave
// most multiprocessors idle.
#include <cstdint>

#include "core/cuda/check_cuda.h"
#include "kernels/bias.cuh"
#include "kernels/bias.h"
#include "kernels/fast_divide.cuh"
#include "kernels/launch_shape.cuh"

namespace ringtrain::kernels {

namespace {

template <typename Index, typename ChannelOf>
__global__ void bias_add_kernel(float* __restrict__ y, const float* __restrict__ bias, Index n,
                                ChannelOf channel_of) {
  const Index stride = static_cast<Index>(gridDim.x) * static_cast<Index>(blockDim.x);
  for (Index i = static_cast<Index>(blockIdx.x) * static_cast<Index>(blockDim.x) + threadIdx.x;
       i < n; i += stride)
    y[i] = bias_add_element(y[i], bias[channel_of(i)]);
}

// inner == 1, dy is [outer, channels]. Block (tile, slice): thread (x, y)
// sums rows begin + y, begin + y + 8, ... of channel tile * 32 + x, so each
// warp reads 32 consecutive floats of a row; then row 0 of threads adds the 8
// partials in order.
__global__ void bias_grad_rows_kernel(const float* __restrict__ dy, float* __restrict__ out,
                                      std::size_t outer, std::size_t channels,
                                      std::size_t rows_per_slice, bool direct, bool accumulate) {
  __shared__ float partial[kBiasTileRows][kBiasTileChannels + 1];
  const std::size_t c = blockIdx.x * kBiasTileChannels + threadIdx.x;
  const std::size_t slice = blockIdx.y;
  const std::size_t begin = bias_slice_begin(slice, rows_per_slice);
  const std::size_t end = bias_slice_end(slice, rows_per_slice, outer);
  float sum = 0.0f;
  if (c < channels)
    for (std::size_t r = begin + threadIdx.y; r < end; r += kBiasTileRows)
      sum += dy[r * channels + c];
  partial[threadIdx.y][threadIdx.x] = sum;
  __syncthreads();
  if (threadIdx.y != 0 || c >= channels) return;
  for (unsigned k = 1; k < kBiasTileRows; ++k) sum += partial[k][threadIdx.x];
  if (direct)
    out[c] = bias_grad_combine(accumulate ? out[c] : 0.0f, sum);
  else
    out[slice * channels + c] = sum;
}

// inner > 1, dy is [outer, channels, inner]. Block (channel, slice) walks the
// slice's rows of that channel's planes in memory order, blockDim.x elements
// apart per thread, then a tree in shared memory.
__global__ void bias_grad_planes_kernel(const float* __restrict__ dy, float* __restrict__ out,
                                        std::size_t outer, std::size_t channels, std::size_t inner,
                                        std::size_t rows_per_slice, bool direct, bool accumulate) {
  __shared__ float partial[kBiasPlaneThreads];
  const std::size_t c = blockIdx.x;
  const std::size_t slice = blockIdx.y;
  const std::size_t end = bias_slice_end(slice, rows_per_slice, outer);
  const std::size_t step_rows = blockDim.x / inner, step_i = blockDim.x % inner;
  std::size_t o = bias_slice_begin(slice, rows_per_slice) + threadIdx.x / inner;
  std::size_t i = threadIdx.x % inner;
  float sum = 0.0f;
  while (o < end) {
    sum += dy[(o * channels + c) * inner + i];
    o += step_rows;
    i += step_i;
    if (i >= inner) {
      i -= inner;
      ++o;
    }
  }
  partial[threadIdx.x] = sum;
  __syncthreads();
  for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) partial[threadIdx.x] += partial[threadIdx.x + s];
    __syncthreads();
  }
  if (threadIdx.x != 0) return;
  if (direct)
    out[c] = bias_grad_combine(accumulate ? out[c] : 0.0f, partial[0]);
  else
    out[slice * channels + c] = partial[0];
}

// dbias[c] from partial[s, c], s in order.
__global__ void bias_grad_finish_kernel(const float* __restrict__ partial,
                                        float* __restrict__ dbias, std::size_t channels,
                                        std::size_t slices, bool accumulate) {
  const std::size_t c = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (c >= channels) return;
  float sum = 0.0f;
  for (std::size_t s = 0; s < slices; ++s) sum += partial[s * channels + c];
  dbias[c] = bias_grad_combine(accumulate ? dbias[c] : 0.0f, sum);
}

}  // namespace

void bias_add_cuda(float* y, const float* bias, std::size_t outer, std::size_t channels,
                   std::size_t inner, void* stream) {
  const std::size_t n = outer * channels * inner;
  if (n == 0) return;
  const auto s = static_cast<cudaStream_t>(stream);
  // The grid-stride index reaches n + grid size: it must not wrap.
  const std::size_t reach =
      n + static_cast<std::size_t>(elementwise_blocks(n)) * kElementwiseThreads;
  if (reach <= UINT32_MAX)
    bias_add_kernel<std::uint32_t><<<elementwise_blocks(n), kElementwiseThreads, 0, s>>>(
        y, bias, static_cast<std::uint32_t>(n),
        ChannelOf32(static_cast<std::uint32_t>(channels), static_cast<std::uint32_t>(inner)));
  else
    bias_add_kernel<std::size_t><<<elementwise_blocks(n), kElementwiseThreads, 0, s>>>(
        y, bias, n, ChannelOfWide{channels, inner});
  RT_CUDA_CHECK_LAUNCH();
}

void bias_grad_cuda(const float* dy, float* dbias, std::size_t outer, std::size_t channels,
                    std::size_t inner, bool accumulate, float* scratch, std::size_t scratch_floats,
                    void* stream) {
  if (channels == 0) return;
  if (inner == 0) {  // nothing to sum: dbias is kept or zeroed
    inner = 1;
    outer = 0;
  }
  const auto s = static_cast<cudaStream_t>(stream);
  const BiasGradSplit split =
      bias_grad_split(outer, channels, inner, scratch != nullptr ? scratch_floats : 0);
  const bool direct = split.slices == 1;
  float* out = direct ? dbias : scratch;
  const dim3 grid(static_cast<unsigned>(split.channel_blocks), static_cast<unsigned>(split.slices));
  if (inner == 1)
    bias_grad_rows_kernel<<<grid, dim3(kBiasTileChannels, kBiasTileRows), 0, s>>>(
        dy, out, outer, channels, split.rows_per_slice, direct, accumulate);
  else
    bias_grad_planes_kernel<<<grid, kBiasPlaneThreads, 0, s>>>(
        dy, out, outer, channels, inner, split.rows_per_slice, direct, accumulate);
  RT_CUDA_CHECK_LAUNCH();
  if (direct) return;
  constexpr unsigned kFinishThreads = 256;
  bias_grad_finish_kernel<<<static_cast<unsigned>((channels + kFinishThreads - 1) / kFinishThreads),
                            kFinishThreads, 0, s>>>(scratch, dbias, channels, split.slices,
                                                    accumulate);
  RT_CUDA_CHECK_LAUNCH();
}

}  // namespace ringtrain::kernels
