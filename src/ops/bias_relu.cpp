// Fused conv bias + ReLU on the CPU, in kernels/bias_relu.cuh's arithmetic;
// the GPU's kernels are kernels/bias_relu.cu. The loops are bias_add's and
// bias_grad's (ops/channel_loops.h), so the bias gradient sums in bias_grad's
// order and its bits are the unfused plan's.
#include "ringtrain/ops/bias_relu.h"

#include "kernels/bias_relu.cuh"
#include "kernels/storage.cuh"
#include "ops/channel_loops.h"
#include "ops/gpu_ops.h"
#include "ringtrain/core/check.h"

namespace ringtrain {

void bias_relu_into(const ComputeContext& ctx, BufferView y, BufferView x, const float* bias,
                    std::size_t outer, std::size_t channels, std::size_t inner) {
  RT_CHECK(x.count == y.count, "bias_relu_into: {} elements into {}", x.count, y.count);
  if (ctx.is_cuda()) return detail::gpu_bias_relu(ctx.stream(), y, x, bias, outer, channels, inner);
  kernels::with_storage_pair(x.dtype, y.dtype, [&](auto source, auto storage) {
    using S = decltype(source);
    using T = decltype(storage);
    const S* xs = x.as<const S>();
    T* ys = y.as<T>();
    detail::for_each_channel_element(outer, channels, inner, [&](std::size_t i, std::size_t c) {
      kernels::store(ys, i, kernels::bias_relu_forward_element(kernels::load(xs, i), bias[c]));
    });
  });
}

void relu_mask_bias_grad(const ComputeContext& ctx, BufferView y, BufferView dy, BufferView masked,
                         float* dbias, std::size_t outer, std::size_t channels, std::size_t inner,
                         bool accumulate) {
  RT_CHECK(y.dtype == dy.dtype && y.count == dy.count && masked.count == dy.count,
           "relu_mask_bias_grad: y ({} of {}), dy ({} of {}) and masked ({}) differ", y.count,
           dtype_name(y.dtype), dy.count, dtype_name(dy.dtype), masked.count);
  if (ctx.is_cuda())
    return detail::gpu_relu_mask_bias_grad(detail::handles_of(ctx), y, dy, masked, dbias, outer,
                                           channels, inner, accumulate);
  float* __restrict__ db = dbias;
  if (!accumulate)
    for (std::size_t c = 0; c < channels; ++c) db[c] = 0.0f;
  kernels::with_storage_pair(dy.dtype, masked.dtype, [&](auto storage, auto out) {
    using T = decltype(storage);
    using M = decltype(out);
    const T* __restrict__ ys = y.as<const T>();
    const T* __restrict__ g = dy.as<const T>();
    M* __restrict__ m = masked.as<M>();
    detail::accumulate_channel_sums(db, outer, channels, inner, [&](std::size_t i) {
      const float v = kernels::relu_masked_dy(kernels::load(ys, i), kernels::load(g, i));
      kernels::store(m, i, v);
      return v;
    });
  });
}

}  // namespace ringtrain
