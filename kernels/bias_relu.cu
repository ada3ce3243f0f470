// Fused conv bias + ReLU on a GPU (kernels/bias_relu.cuh's arithmetic).
//
// Forward: one elementwise pass after cuDNN's convolution, in place on its
// 16-bit y (or from its fp32 output): the unfused plan's bias_add and relu
// read and wrote y twice. Backward: relu's mask and the bias gradient in one
// pass, the bias gradient's own reduction (kernels/channel_reduce.cuh, split
// and ordered as bias_grad_cuda's) whose value functor also stores the masked
// dy that cuDNN's backward-filter and backward-data then read. Every element
// is visited once, so the store is safe in the reduction.
#include <cstdint>

#include "core/cuda/check_cuda.h"
#include "kernels/bias_relu.cuh"
#include "kernels/bias_relu.h"
#include "kernels/channel_reduce.cuh"
#include "kernels/fast_divide.cuh"
#include "kernels/launch_shape.cuh"
#include "kernels/storage.cuh"

namespace ringtrain::kernels {

namespace {

template <typename Index, typename ChannelOf, typename S, typename T>
__global__ void bias_relu_kernel(const S* x, T* y, const float* __restrict__ bias, Index n,
                                 ChannelOf channel_of) {
  const Index stride = static_cast<Index>(gridDim.x) * static_cast<Index>(blockDim.x);
  for (Index i = static_cast<Index>(blockIdx.x) * static_cast<Index>(blockDim.x) + threadIdx.x;
       i < n; i += stride)
    store(y, i, bias_relu_forward_element(load(x, i), bias[channel_of(i)]));
}

// The masked dy, stored as it is summed (bias.cu's DyValue of relu's dx).
template <typename T, typename M>
struct MaskedDyValue {
  const T* y;
  const T* dy;
  M* masked;
  __device__ Sums<1> operator()(std::size_t a, std::size_t) const {
    const float v = relu_masked_dy(load(y, a), load(dy, a));
    store(masked, a, v);
    return {{v}};
  }
};

// bias.cu's BiasGradFinish.
struct MaskedBiasGradFinish {
  float* dbias;
  bool accumulate;
  __device__ void operator()(std::size_t c, const Sums<1>& t) const {
    dbias[c] = bias_grad_combine(accumulate ? dbias[c] : 0.0f, t.v[0]);
  }
};

}  // namespace

void bias_relu_cuda(const void* x, DType x_type, void* y, DType t, const float* bias,
                    std::size_t outer, std::size_t channels, std::size_t inner, void* stream) {
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
      bias_relu_kernel<std::uint32_t><<<elementwise_blocks(n), kElementwiseThreads, 0, s>>>(
          xs, ys, bias, static_cast<std::uint32_t>(n),
          ChannelOf32(static_cast<std::uint32_t>(channels), static_cast<std::uint32_t>(inner)));
    else
      bias_relu_kernel<std::size_t><<<elementwise_blocks(n), kElementwiseThreads, 0, s>>>(
          xs, ys, bias, n, ChannelOfWide{channels, inner});
  });
  RT_CUDA_CHECK_LAUNCH();
}

void relu_mask_bias_grad_cuda(const void* y, const void* dy, DType t, void* masked,
                              DType masked_type, float* dbias, std::size_t outer,
                              std::size_t channels, std::size_t inner, bool accumulate,
                              float* scratch, std::size_t scratch_floats, void* stream) {
  with_storage_pair(t, masked_type, [&](auto storage, auto out) {
    using T = decltype(storage);
    using M = decltype(out);
    reduce_channels<1>(outer, channels, inner,
                       MaskedDyValue<T, M>{static_cast<const T*>(y), static_cast<const T*>(dy),
                                           static_cast<M*>(masked)},
                       MaskedBiasGradFinish{dbias, accumulate}, scratch, scratch_floats, stream);
  });
}

}  // namespace ringtrain::kernels
