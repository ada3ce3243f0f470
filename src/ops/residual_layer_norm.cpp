// Fused residual add + LayerNorm on either device: the CPU loops and the CUDA
// kernels share kernels/residual_layer_norm.cuh's row arithmetic; the GPU's
// weight and bias gradients are layer_norm_backward's ordered column sums.
#include "ringtrain/ops/residual_layer_norm.h"

#include <algorithm>

#include "kernels/residual_layer_norm.cuh"
#include "kernels/storage.cuh"
#include "ops/gpu_ops.h"
#include "ringtrain/core/check.h"

namespace ringtrain {

void residual_layer_norm_forward(const ComputeContext& ctx, BufferView x0, BufferView x1,
                                 float scale, const float* w, const float* b, std::size_t rows,
                                 std::size_t c, float eps, BufferView sum, BufferView y,
                                 float* mean, float* rstd) {
  RT_CHECK(x0.dtype == y.dtype && x1.dtype == y.dtype && sum.dtype == y.dtype,
           "residual_layer_norm: inputs, sum and output must share the storage dtype");
  if (ctx.is_cuda())
    return detail::gpu_residual_layer_norm_forward(ctx.stream(), x0, x1, scale, w, b, rows, c, eps,
                                                   sum, y, mean, rstd);
  const int ci = static_cast<int>(c);
  kernels::with_storage(y.dtype, [&](auto storage) {
    using T = decltype(storage);
    const T* a = x0.as<const T>();
    const T* r = x1.as<const T>();
    T* s = sum.as<T>();
    T* ys = y.as<T>();
    for (std::size_t i = 0; i < rows; ++i)
      kernels::residual_layer_norm_row_forward(a + i * c, r + i * c, scale, w, b, ci, eps,
                                               s + i * c, ys + i * c, &mean[i], &rstd[i]);
  });
}

void residual_layer_norm_backward(const ComputeContext& ctx, BufferView sum, const float* w,
                                  BufferView dy, std::size_t rows, std::size_t c, const float* mean,
                                  const float* rstd, BufferView d_sum, bool summed, float scale,
                                  BufferView dx0, BufferView dx1, float* dw, float* db,
                                  bool accumulate) {
  RT_CHECK(sum.dtype == dy.dtype, "residual_layer_norm: the sum and dy must share a dtype");
  RT_CHECK(!summed || d_sum.ptr != nullptr, "residual_layer_norm: a summed gradient needs d_sum");
  if (ctx.is_cuda()) {
    detail::gpu_residual_layer_norm_backward(ctx.stream(), sum, w, dy, rows, c, mean, rstd, d_sum,
                                             summed, scale, dx0, dx1);
    detail::gpu_layer_norm_param_grad(detail::handles_of(ctx), sum, dy, rows, c, mean, rstd, dw, db,
                                      accumulate);
    return;
  }
  if (!accumulate) {
    std::fill_n(dw, c, 0.0f);
    std::fill_n(db, c, 0.0f);
  }
  const int ci = static_cast<int>(c);
  kernels::with_storage(dy.dtype, [&](auto storage) {
    using T = decltype(storage);
    kernels::with_storage_or_f32<T>(d_sum.dtype, [&](auto g_storage) {
      using G = decltype(g_storage);
      kernels::with_storage_or_f32<T>(dx0.dtype, [&](auto d0_storage) {
        using D0 = decltype(d0_storage);
        kernels::with_storage_or_f32<T>(dx1.dtype, [&](auto d1_storage) {
          using D1 = decltype(d1_storage);
          const T* s = sum.as<const T>();
          const T* dys = dy.as<const T>();
          const G* g = d_sum.as<const G>();
          D0* d0 = dx0.as<D0>();
          D1* d1 = dx1.as<D1>();
          for (std::size_t i = 0; i < rows; ++i)
            kernels::residual_layer_norm_row_backward(s + i * c, w, dys + i * c, ci, mean[i],
                                                      rstd[i], g != nullptr ? g + i * c : g, summed,
                                                      scale, d0 != nullptr ? d0 + i * c : d0,
                                                      d1 != nullptr ? d1 + i * c : d1, dw, db);
        });
      });
    });
  });
}

}  // namespace ringtrain
