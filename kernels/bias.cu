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
// promise. kernels/channel_reduce.cuh covers both layouts with one scheme
// (split by kernels/bias.cuh): thread blocks over (channel group, row slice),
// each summing in a fixed order, then an ordered sum of the slices' partials.
// No float atomics, so the gradient is bit-for-bit repeatable. Enough blocks for
// the whole GPU: e.g. a conv with 32 channels at batch 512 of 28x28 maps (12.8
// M floats) runs as 32 x 16 blocks, where one block per channel would leave
// most multiprocessors idle.
#include <cstdint>

#include "core/cuda/check_cuda.h"
#include "kernels/bias.cuh"
#include "kernels/bias.h"
#include "kernels/channel_reduce.cuh"
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

// The bias gradient as a channel reduction (kernels/channel_reduce.cuh).
struct DyValue {
  const float* dy;
  __device__ Sums<1> operator()(std::size_t a, std::size_t) const { return {{dy[a]}}; }
};

struct BiasGradFinish {
  float* dbias;
  bool accumulate;
  __device__ void operator()(std::size_t c, const Sums<1>& t) const {
    dbias[c] = bias_grad_combine(accumulate ? dbias[c] : 0.0f, t.v[0]);
  }
};

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
  reduce_channels<1>(outer, channels, inner, DyValue{dy}, BiasGradFinish{dbias, accumulate},
                     scratch, scratch_floats, stream);
}

}  // namespace ringtrain::kernels
