// Fused BatchNorm + (add +) ReLU on either device: BatchNorm's statistics and
// backward sums through the same steps as the plain op (ops/batch_norm_steps.h),
// the elementwise passes from kernels/batch_norm_relu.cuh.
#include "ringtrain/ops/batch_norm_relu.h"

#include "kernels/batch_norm_relu.cuh"
#include "kernels/storage.cuh"
#include "ops/batch_norm_steps.h"
#include "ops/gpu_ops.h"

namespace ringtrain {

void batch_norm_relu_forward(const ComputeContext& ctx, const BatchNormShape& s, BufferView x,
                             BufferView residual, BufferView y, std::size_t batch, bool training,
                             bool update_running, float eps, float momentum, const float* gamma,
                             const float* beta, float* running_mean, float* running_var,
                             const BatchNormSaved& saved, BatchStatReducer* sync) {
  const std::size_t C = s.channels, HW = s.inner;
  const DType precision = ctx.precision();
  // A rank with no samples still takes part in the statistics' sums.
  if (batch == 0 && (!training || sync == nullptr)) return;
  if (ctx.is_cuda()) {
    detail::gpu_statistics(ctx, x, batch, C, HW, training, update_running, eps, momentum,
                           running_mean, running_var, saved, sync);
    if (batch > 0)
      detail::gpu_batch_norm_relu_apply(ctx.stream(), x, residual, y, batch, C, HW, saved.mean,
                                        saved.invstd, gamma, beta, precision);
    return;
  }
  kernels::with_storage(x.dtype, [&](auto storage) {
    using T = decltype(storage);
    const T* xs = x.as<const T>();
    const T* rs = residual.as<const T>();
    T* ys = y.as<T>();
    if (training)
      detail::cpu_statistics(s, xs, batch, eps, momentum, update_running, running_mean, running_var,
                             saved, sync);
    else
      detail::cpu_eval_statistics(C, eps, running_mean, running_var, saved);
    const bool has_residual = rs != nullptr;
    for (std::size_t c = 0; c < C; ++c)
      detail::for_channel(xs, batch, C, HW, c, [&](float v, std::size_t at) {
        kernels::store(ys, at,
                       kernels::bn_relu_forward_element<T>(
                           v, saved.mean[c], saved.invstd[c], gamma, beta, static_cast<int>(c),
                           precision, has_residual, has_residual ? kernels::load(rs, at) : 0.0f));
      });
  });
}

namespace {

// The pass after the sums: dx (D: the storage type or f32; null: not wanted)
// and the residual's gradient (R; null: none), each element's masked dy
// computed once for both.
template <typename T, typename D, typename R>
void cpu_backward_outputs(const BatchNormShape& s, const T* x, const T* y, const T* dy, D* dx,
                          R* d_residual, std::size_t batch, const float* gamma,
                          const BatchNormSaved& saved, DType precision) {
  const std::size_t C = s.channels, HW = s.inner;
  const float* sums = saved.sums;
  const float count = *detail::count_slot(saved, C);
  for (std::size_t c = 0; c < C; ++c) {
    const float g = gamma != nullptr ? gamma[c] : 1.0f;
    detail::for_channel(x, batch, C, HW, c, [&](float v, std::size_t at) {
      const float m = kernels::bn_relu_masked_dy(kernels::load(y, at), kernels::load(dy, at));
      if (dx != nullptr)
        kernels::store(dx, at,
                       kernels::round_to_precision_grid(
                           kernels::bn_backward_element(v, m, saved.mean[c], saved.invstd[c], g,
                                                        sums[c], sums[C + c], count),
                           precision));
      if (d_residual != nullptr) kernels::store(d_residual, at, m);
    });
  }
}

}  // namespace

void batch_norm_relu_backward(const ComputeContext& ctx, const BatchNormShape& s, BufferView x,
                              BufferView y, BufferView dy, BufferView dx, BufferView d_residual,
                              std::size_t batch, const float* gamma, const BatchNormSaved& saved,
                              float* dgamma, float* dbeta, bool accumulate,
                              BatchStatReducer* sync) {
  const std::size_t C = s.channels, HW = s.inner;
  const DType precision = ctx.precision();
  const bool outputs = (dx.ptr != nullptr || d_residual.ptr != nullptr) && batch > 0;
  if (ctx.is_cuda()) {
    detail::gpu_batch_norm_relu_backward_reduce(detail::handles_of(ctx), x, y, dy, batch, C, HW,
                                                saved.mean, saved.invstd, saved.sums, dgamma, dbeta,
                                                accumulate);
    if (sync != nullptr) sync->sum(saved.sums, 2 * C);
    if (outputs)
      detail::gpu_batch_norm_relu_backward_dx(ctx.stream(), x, y, dy, dx, d_residual, batch, C, HW,
                                              saved.mean, saved.invstd, gamma, saved.sums,
                                              detail::count_slot(saved, C), precision);
    return;
  }
  kernels::with_storage(dy.dtype, [&](auto storage) {
    using T = decltype(storage);
    const T* xs = x.as<const T>();
    const T* ys = y.as<const T>();
    const T* dys = dy.as<const T>();
    detail::cpu_backward_sums(
        s, xs, batch, saved, dgamma, dbeta, accumulate, sync, [&](std::size_t at) {
          return kernels::bn_relu_masked_dy(kernels::load(ys, at), kernels::load(dys, at));
        });
    if (!outputs) return;
    // dx and d_residual default to T where absent, so that the dispatch
    // stays three ways each.
    kernels::with_storage_pair(dx.ptr != nullptr ? dx.dtype : dy.dtype,
                               d_residual.ptr != nullptr ? d_residual.dtype : dy.dtype,
                               [&](auto dx_storage, auto r_storage) {
                                 using D = decltype(dx_storage);
                                 using R = decltype(r_storage);
                                 cpu_backward_outputs(s, xs, ys, dys, dx.as<D>(),
                                                      d_residual.as<R>(), batch, gamma, saved,
                                                      precision);
                               });
  });
}

}  // namespace ringtrain
