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
#include "kernels/bias_launch.cuh"
#include "kernels/bias_relu.cuh"
#include "kernels/bias_relu.h"
#include "kernels/channel_reduce.cuh"
#include "kernels/fast_divide.cuh"
#include "kernels/launch_shape.cuh"
#include "kernels/storage.cuh"
#include "kernels/vector8.cuh"

namespace ringtrain::kernels {

namespace {

// relu(x + bias), the sum rounded as bias_add stores it (bias_relu.cuh).
struct BiasRelu {
  __device__ float operator()(float x, float b) const { return bias_relu_forward_element(x, b); }
};

// The masked dy, stored as it is summed (bias.cu's DyValue of relu's dx),
// by emit after a group of rows' loads (kernels/channel_reduce.cuh); 8
// channels of a row at a time where the buffers allow (values8).
template <typename T, typename M>
struct MaskedDyValue {
  const T* y;
  const T* dy;
  M* masked;
  __device__ Sums<1> operator()(std::size_t a, std::size_t) const {
    return {{relu_masked_dy(load(y, a), load(dy, a))}};
  }
  __device__ void emit(std::size_t a, const Sums<1>& v) const { store(masked, a, v.v[0]); }
  __device__ void emit8(std::size_t a, const Sums<1> (&v)[kVector8]) const {
    float g[kVector8];
#pragma unroll
    for (unsigned k = 0; k < kVector8; ++k) g[k] = v[k].v[0];
    store8(masked, a, g);
  }
  bool rows8_aligned() const {
    return vector8_aligned(y) && vector8_aligned(dy) && vector8_aligned(masked);
  }
  __device__ void values8(std::size_t a, std::size_t, Sums<1> (&out)[kVector8]) const {
    float ys[kVector8], ds[kVector8];
    load8(y, a, ys);
    load8(dy, a, ds);
#pragma unroll
    for (unsigned k = 0; k < kVector8; ++k) out[k] = {{relu_masked_dy(ys[k], ds[k])}};
  }
};

}  // namespace

void bias_relu_cuda(const void* x, DType x_type, void* y, DType t, const float* bias,
                    std::size_t outer, std::size_t channels, std::size_t inner, void* stream) {
  launch_bias_elementwise(x, x_type, y, t, bias, outer, channels, inner, stream, BiasRelu{});
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
                       BiasGradFinish{dbias, accumulate}, scratch, scratch_floats, stream);
  });
}

}  // namespace ringtrain::kernels
