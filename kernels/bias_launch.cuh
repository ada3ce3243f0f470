// What bias.cu and bias_relu.cu share (CUDA only; .cu files include it): the
// per-channel elementwise launch over [outer, channels, inner] and the bias
// gradient's finish of a channel reduction.
#pragma once

#include <cstdint>

#include <cuda_runtime.h>

#include "core/cuda/check_cuda.h"
#include "kernels/bias.cuh"
#include "kernels/channel_reduce.cuh"
#include "kernels/fast_divide.cuh"
#include "kernels/launch_shape.cuh"
#include "kernels/storage.cuh"

namespace ringtrain::kernels {

// y[i] = op(x[i], bias[channel of i]), computed in fp32 and stored once as T.
template <typename Index, typename ChannelOf, typename S, typename T, typename Op>
__global__ void bias_elementwise_kernel(const S* x, T* y, const float* __restrict__ bias, Index n,
                                        ChannelOf channel_of, Op op) {
  const Index stride = static_cast<Index>(gridDim.x) * static_cast<Index>(blockDim.x);
  for (Index i = static_cast<Index>(blockIdx.x) * static_cast<Index>(blockDim.x) + threadIdx.x;
       i < n; i += stride)
    store(y, i, op(load(x, i), bias[channel_of(i)]));
}

// The launch: grid-stride, with 32-bit index arithmetic and no division where
// the index (which reaches n + the grid's size) cannot wrap.
template <typename Op>
void launch_bias_elementwise(const void* x, DType x_type, void* y, DType t, const float* bias,
                             std::size_t outer, std::size_t channels, std::size_t inner,
                             void* stream, Op op) {
  const std::size_t n = outer * channels * inner;
  if (n == 0) return;
  const auto s = static_cast<cudaStream_t>(stream);
  const std::size_t reach =
      n + static_cast<std::size_t>(elementwise_blocks(n)) * kElementwiseThreads;
  with_storage_pair(x_type, t, [&](auto source, auto storage) {
    using S = decltype(source);
    using T = decltype(storage);
    const S* xs = static_cast<const S*>(x);
    T* ys = static_cast<T*>(y);
    if (reach <= UINT32_MAX)
      bias_elementwise_kernel<std::uint32_t><<<elementwise_blocks(n), kElementwiseThreads, 0, s>>>(
          xs, ys, bias, static_cast<std::uint32_t>(n),
          ChannelOf32(static_cast<std::uint32_t>(channels), static_cast<std::uint32_t>(inner)), op);
    else
      bias_elementwise_kernel<std::size_t><<<elementwise_blocks(n), kElementwiseThreads, 0, s>>>(
          xs, ys, bias, n, ChannelOfWide{channels, inner}, op);
  });
  RT_CUDA_CHECK_LAUNCH();
}

// A bias gradient's channel sums into dbias, added to it when accumulating.
struct BiasGradFinish {
  float* dbias;
  bool accumulate;
  __device__ void operator()(std::size_t c, const Sums<1>& t) const {
    dbias[c] = bias_grad_combine(accumulate ? dbias[c] : 0.0f, t.v[0]);
  }
};

}  // namespace ringtrain::kernels
