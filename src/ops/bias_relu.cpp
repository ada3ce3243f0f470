// Fused conv bias + ReLU on the CPU, in kernels/bias_relu.cuh's arithmetic;
// the GPU's kernels are kernels/bias_relu.cu. The loops walk memory as
// bias_add and bias_grad do, and the bias gradient sums in bias_grad's order
// (per channel over its planes; NHWC row by row onto dbias), so its bits are
// the unfused plan's.
#include "ringtrain/ops/bias_relu.h"

#include "kernels/bias_relu.cuh"
#include "kernels/storage.cuh"
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
    for (std::size_t o = 0; o < outer; ++o) {
      const std::size_t row = o * channels * inner;
      if (inner == 1) {
        for (std::size_t c = 0; c < channels; ++c)
          kernels::store(ys, row + c,
                         kernels::bias_relu_forward_element(kernels::load(xs, row + c), bias[c]));
        continue;
      }
      for (std::size_t c = 0; c < channels; ++c) {
        const std::size_t plane = row + c * inner;
        const float b = bias[c];
        for (std::size_t i = 0; i < inner; ++i)
          kernels::store(ys, plane + i,
                         kernels::bias_relu_forward_element(kernels::load(xs, plane + i), b));
      }
    }
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
    if (inner == 1) {
      for (std::size_t o = 0; o < outer; ++o)
        for (std::size_t c = 0; c < channels; ++c) {
          const std::size_t i = o * channels + c;
          const float v = kernels::relu_masked_dy(kernels::load(ys, i), kernels::load(g, i));
          kernels::store(m, i, v);
          db[c] += v;
        }
      return;
    }
    for (std::size_t c = 0; c < channels; ++c) {
      float sum = 0.0f;
      for (std::size_t o = 0; o < outer; ++o) {
        const std::size_t plane = (o * channels + c) * inner;
        for (std::size_t i = 0; i < inner; ++i) {
          const float v =
              kernels::relu_masked_dy(kernels::load(ys, plane + i), kernels::load(g, plane + i));
          kernels::store(m, plane + i, v);
          sum += v;
        }
      }
      db[c] = kernels::bias_grad_combine(db[c], sum);
    }
  });
}

}  // namespace ringtrain
