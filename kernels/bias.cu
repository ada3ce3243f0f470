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
#include "kernels/storage.cuh"

namespace ringtrain::kernels {

namespace {

// y and dy of a storage type T (kernels/storage.cuh): loaded to fp32, y
// stored once.
template <typename Index, typename ChannelOf, typename S, typename T>
__global__ void bias_add_kernel(const S* x, T* y, const float* __restrict__ bias, Index n,
                                ChannelOf channel_of) {
  const Index stride = static_cast<Index>(gridDim.x) * static_cast<Index>(blockDim.x);
  for (Index i = static_cast<Index>(blockIdx.x) * static_cast<Index>(blockDim.x) + threadIdx.x;
       i < n; i += stride)
    store(y, i, bias_add_element(load(x, i), bias[channel_of(i)]));
}

// The bias gradient as a channel reduction (kernels/channel_reduce.cuh).
template <typename T>
struct DyValue {
  const T* dy;
  __device__ Sums<1> operator()(std::size_t a, std::size_t) const { return {{load(dy, a)}}; }
};

struct BiasGradFinish {
  float* dbias;
  bool accumulate;
  __device__ void operator()(std::size_t c, const Sums<1>& t) const {
    dbias[c] = bias_grad_combine(accumulate ? dbias[c] : 0.0f, t.v[0]);
  }
};

}  // namespace

void bias_add_cuda(const void* x, DType x_type, void* y, DType t, const float* bias,
                   std::size_t outer, std::size_t channels, std::size_t inner, void* stream) {
  const std::size_t n = outer * channels * inner;
  if (n == 0) return;
  const auto s = static_cast<cudaStream_t>(stream);
  // The grid-stride index reaches n + grid size: it must not wrap.
  const std::size_t reach =
      n + static_cast<std::size_t>(elementwise_blocks(n)) * kElementwiseThreads;
  with_storage_pair(x_type, t, [&](auto source, auto storage) {
    using S = decltype(source);
    using T = decltype(storage);
    const S* xs = static_cast<const S*>(x);
    T* ys = static_cast<T*>(y);
    if (reach <= UINT32_MAX)
      bias_add_kernel<std::uint32_t><<<elementwise_blocks(n), kElementwiseThreads, 0, s>>>(
          xs, ys, bias, static_cast<std::uint32_t>(n),
          ChannelOf32(static_cast<std::uint32_t>(channels), static_cast<std::uint32_t>(inner)));
    else
      bias_add_kernel<std::size_t><<<elementwise_blocks(n), kElementwiseThreads, 0, s>>>(
          xs, ys, bias, n, ChannelOfWide{channels, inner});
  });
  RT_CUDA_CHECK_LAUNCH();
}

void bias_grad_cuda(const void* dy, DType t, float* dbias, std::size_t outer, std::size_t channels,
                    std::size_t inner, bool accumulate, float* scratch, std::size_t scratch_floats,
                    void* stream) {
  with_storage(t, [&](auto storage) {
    using T = decltype(storage);
    reduce_channels<1>(outer, channels, inner, DyValue<T>{static_cast<const T*>(dy)},
                       BiasGradFinish{dbias, accumulate}, scratch, scratch_floats, stream);
  });
}

}  // namespace ringtrain::kernels
