#include "ringtrain/ops/bias.h"

#include "kernels/bias.cuh"
#include "kernels/storage.cuh"
#include "ops/channel_loops.h"
#include "ops/gpu_ops.h"
#include "ringtrain/core/check.h"

namespace ringtrain {

void bias_add(const ComputeContext& ctx, float* y, const float* bias, std::size_t outer,
              std::size_t channels, std::size_t inner) {
  bias_add(ctx, view_of(y, outer * channels * inner, ctx.device()), bias, outer, channels, inner);
}

void bias_grad(const ComputeContext& ctx, const float* dy, float* dbias, std::size_t outer,
               std::size_t channels, std::size_t inner, bool accumulate) {
  bias_grad(ctx, view_of(dy, outer * channels * inner, ctx.device()), dbias, outer, channels, inner,
            accumulate);
}

void bias_add(const ComputeContext& ctx, BufferView y, const float* bias, std::size_t outer,
              std::size_t channels, std::size_t inner) {
  if (ctx.is_cuda()) return detail::gpu_bias_add(ctx.stream(), y, y, bias, outer, channels, inner);
  kernels::with_storage(y.dtype, [&](auto storage) {
    using T = decltype(storage);
    T* ys = y.as<T>();
    detail::for_each_channel_element(outer, channels, inner, [&](std::size_t i, std::size_t c) {
      kernels::store(ys, i, kernels::bias_add_element(kernels::load(ys, i), bias[c]));
    });
  });
}

void bias_grad(const ComputeContext& ctx, BufferView dy, float* dbias, std::size_t outer,
               std::size_t channels, std::size_t inner, bool accumulate) {
  if (ctx.is_cuda())
    return detail::gpu_bias_grad(detail::handles_of(ctx), dy, dbias, outer, channels, inner,
                                 accumulate);
  float* __restrict__ db = dbias;
  if (!accumulate)
    for (std::size_t c = 0; c < channels; ++c) db[c] = 0.0f;
  kernels::with_storage(dy.dtype, [&](auto storage) {
    using T = decltype(storage);
    const T* __restrict__ g = dy.as<const T>();
    detail::accumulate_channel_sums(db, outer, channels, inner,
                                    [&](std::size_t i) { return kernels::load(g, i); });
  });
}

void bias_add_into(const ComputeContext& ctx, BufferView y, BufferView x, const float* bias,
                   std::size_t outer, std::size_t channels, std::size_t inner) {
  RT_CHECK(x.count == y.count, "bias_add_into: {} elements into {}", x.count, y.count);
  if (ctx.is_cuda()) return detail::gpu_bias_add(ctx.stream(), y, x, bias, outer, channels, inner);
  kernels::with_storage_pair(x.dtype, y.dtype, [&](auto source, auto storage) {
    using S = decltype(source);
    using T = decltype(storage);
    const S* xs = x.as<const S>();
    T* ys = y.as<T>();
    detail::for_each_channel_element(outer, channels, inner, [&](std::size_t i, std::size_t c) {
      kernels::store(ys, i, kernels::bias_add_element(kernels::load(xs, i), bias[c]));
    });
  });
}

}  // namespace ringtrain
