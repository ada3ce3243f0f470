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
#include "kernels/vector8.cuh"

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

// Rows of channels (inner 1: NHWC, a Linear's rows) with 8 | channels and
// 16-byte aligned buffers: a thread takes 8 consecutive channels of a row
// (16-byte accesses where each thread moved 2 bytes), the same op on the same
// values. x may be y (in place): each thread reads its 8 before writing them.
template <typename S, typename T, typename Op>
__global__ void bias_rows8_kernel(const S* x, T* y, const float* __restrict__ bias,
                                  std::uint32_t vectors, std::uint32_t groups, Op op) {
  const std::uint32_t stride = gridDim.x * blockDim.x;
  for (std::uint32_t v = blockIdx.x * blockDim.x + threadIdx.x; v < vectors; v += stride) {
    const std::uint32_t c0 = (v % groups) * kVector8;
    float xs[kVector8];
    load8(x, std::size_t{v} * kVector8, xs);
#pragma unroll
    for (std::uint32_t k = 0; k < kVector8; ++k) xs[k] = op(xs[k], bias[c0 + k]);
    store8(y, std::size_t{v} * kVector8, xs);
  }
}

// The launch: grid-stride, with 32-bit index arithmetic and no division where
// the index (which reaches n + the grid's size) cannot wrap; 8 channels a
// thread where bias_rows8_kernel fits.
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
    if (inner == 1 && channels % kVector8 == 0 && reach <= UINT32_MAX && vector8_aligned(xs) &&
        vector8_aligned(ys)) {
      const auto vectors = static_cast<std::uint32_t>(n / kVector8);
      bias_rows8_kernel<<<elementwise_blocks(vectors), kElementwiseThreads, 0, s>>>(
          xs, ys, bias, vectors, static_cast<std::uint32_t>(channels / kVector8), op);
    } else if (reach <= UINT32_MAX)
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
