#include "ringtrain/ops/dropout.h"

#include "kernels/dropout.cuh"
#include "kernels/storage.cuh"
#include "ops/gpu_ops.h"
#include "ringtrain/core/check.h"

namespace ringtrain {

std::uint64_t dropout_mask_key(std::uint64_t seed, std::uint64_t rank, std::uint64_t step,
                               std::uint64_t layer) {
  return kernels::dropout_key(seed, rank, step, layer);
}

void dropout_apply(const ComputeContext& ctx, const float* x, float* y, std::size_t n,
                   std::uint64_t key, float p, std::size_t channels, std::size_t hw) {
  dropout_apply(ctx, view_of(x, n, ctx.device()), view_of(y, n, ctx.device()), key, p, channels,
                hw);
}

void dropout_apply(const ComputeContext& ctx, BufferView x, BufferView y, std::uint64_t key,
                   float p, std::size_t channels, std::size_t hw) {
  RT_CHECK(p >= 0.0f && p < 1.0f, "dropout probability {} is outside [0, 1)", p);
  const float keep_scale = 1.0f / (1.0f - p);
  if (ctx.is_cuda())
    return detail::gpu_dropout_apply(ctx.stream(), x, y, key, p, keep_scale, channels, hw);
  kernels::with_storage_pair(x.dtype, y.dtype, [&](auto storage, auto y_storage) {
    using T = decltype(storage);
    using D = decltype(y_storage);
    const T* xs = x.as<const T>();
    D* ys = y.as<D>();
    for (std::size_t i = 0; i < y.count; ++i)
      kernels::store(ys, i,
                     kernels::load(xs, i) *
                         kernels::dropout_factor(key, kernels::dropout_mask_index(i, channels, hw),
                                                 p, keep_scale));
  });
}

}  // namespace ringtrain
