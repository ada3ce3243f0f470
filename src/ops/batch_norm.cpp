// BatchNorm as steps, on either device: the statistics (CPU: per-channel sums
// and the sample count -> mean -> squared deviations from it; GPU: one pass of
// Welford partials) -> invstd and the running update -> the normalisation.
// Between the steps a BatchStatReducer may sum the partials over the ranks
// (--sync-bn). The CPU accumulates each channel's sums in double; both sides
// share the per-element functions of kernels/batch_norm.cuh
// (src/ops/batch_norm_steps.h).
#include "ringtrain/ops/batch_norm.h"

#include "kernels/batch_norm.cuh"
#include "kernels/precision.cuh"
#include "kernels/storage.cuh"
#include "ops/batch_norm_steps.h"
#include "ops/gpu_ops.h"
#include "ringtrain/tensor/device_memory.h"

namespace ringtrain {

namespace {

using detail::count_slot;
using detail::for_channel;

template <typename T, typename D>
void cpu_backward(const BatchNormShape& s, const T* x, const T* dy, D* dx, std::size_t batch,
                  const float* gamma, const BatchNormSaved& saved, float* dgamma, float* dbeta,
                  bool accumulate, BatchStatReducer* sync, DType precision) {
  const std::size_t C = s.channels, HW = s.inner;
  float* sums = saved.sums;
  detail::cpu_backward_sums(
      s, x, batch, saved, dgamma, dbeta, accumulate, sync,
      [dy](std::size_t at, float, std::size_t) { return kernels::load(dy, at); });
  if (dx == nullptr) return;
  const float count = *count_slot(saved, C);
  for (std::size_t c = 0; c < C; ++c) {
    const float g = gamma != nullptr ? gamma[c] : 1.0f;
    for_channel(x, batch, C, HW, c, [&](float v, std::size_t at) {
      kernels::store(
          dx, at,
          kernels::round_to_precision_grid(
              kernels::bn_backward_element(v, kernels::load(dy, at), saved.mean[c], saved.invstd[c],
                                           g, sums[c], sums[C + c], count),
              precision));
    });
  }
}

}  // namespace

void batch_norm_forward(const ComputeContext& ctx, const BatchNormShape& s, const float* x,
                        float* y, std::size_t batch, bool training, bool update_running, float eps,
                        float momentum, const float* gamma, const float* beta, float* running_mean,
                        float* running_var, const BatchNormSaved& saved, BatchStatReducer* sync) {
  const std::size_t n = batch * s.channels * s.inner;
  batch_norm_forward(ctx, s, view_of(x, n, ctx.device()), view_of(y, n, ctx.device()), batch,
                     training, update_running, eps, momentum, gamma, beta, running_mean,
                     running_var, saved, sync);
}

void batch_norm_forward(const ComputeContext& ctx, const BatchNormShape& s, BufferView x,
                        BufferView y, std::size_t batch, bool training, bool update_running,
                        float eps, float momentum, const float* gamma, const float* beta,
                        float* running_mean, float* running_var, const BatchNormSaved& saved,
                        BatchStatReducer* sync) {
  const std::size_t C = s.channels, HW = s.inner;
  // y as the model stores it: on the context's 16-bit grid under bf16/fp16
  // (an fp32 y rounded; a 16-bit one rounds as it is stored).
  const DType precision = ctx.precision();
  // A rank with no samples still takes part in the statistics' sums.
  if (batch == 0 && (!training || sync == nullptr)) return;
  if (ctx.is_cuda()) {
    detail::gpu_statistics(ctx, x, batch, C, HW, training, update_running, eps, momentum,
                           running_mean, running_var, saved, sync);
    if (batch > 0)
      detail::gpu_batch_norm_apply(ctx.stream(), x, y, batch, C, HW, saved.mean, saved.invstd,
                                   gamma, beta, precision);
    return;
  }
  kernels::with_storage(x.dtype, [&](auto storage) {
    using T = decltype(storage);
    const T* xs = x.as<const T>();
    T* ys = y.as<T>();
    if (training) {
      detail::cpu_statistics(s, xs, batch, eps, momentum, update_running, running_mean, running_var,
                             saved, sync);
    } else {
      detail::cpu_eval_statistics(C, eps, running_mean, running_var, saved);
    }
    for (std::size_t c = 0; c < C; ++c)
      for_channel(xs, batch, C, HW, c, [&](float v, std::size_t at) {
        kernels::store(ys, at,
                       kernels::round_to_precision_grid(
                           kernels::bn_apply_element(v, saved.mean[c], saved.invstd[c], gamma, beta,
                                                     static_cast<int>(c)),
                           precision));
      });
  });
}

void batch_norm_backward(const ComputeContext& ctx, const BatchNormShape& s, const float* x,
                         const float* dy, float* dx, std::size_t batch, const float* gamma,
                         const BatchNormSaved& saved, float* dgamma, float* dbeta, bool accumulate,
                         BatchStatReducer* sync) {
  const std::size_t n = batch * s.channels * s.inner;
  batch_norm_backward(ctx, s, view_of(x, n, ctx.device()), view_of(dy, n, ctx.device()),
                      view_of(dx, dx != nullptr ? n : 0, ctx.device()), batch, gamma, saved, dgamma,
                      dbeta, accumulate, sync);
}

void batch_norm_backward(const ComputeContext& ctx, const BatchNormShape& s, BufferView x,
                         BufferView dy, BufferView dx, std::size_t batch, const float* gamma,
                         const BatchNormSaved& saved, float* dgamma, float* dbeta, bool accumulate,
                         BatchStatReducer* sync) {
  const std::size_t C = s.channels, HW = s.inner;
  // dx as the model stores activation gradients: on the 16-bit grid under bf16/fp16.
  const DType precision = ctx.precision();
  if (ctx.is_cuda()) {
    void* st = ctx.stream();
    detail::gpu_batch_norm_backward_reduce(detail::handles_of(ctx), x, dy, batch, C, HW, saved.mean,
                                           saved.invstd, saved.sums, dgamma, dbeta, accumulate);
    if (sync != nullptr) sync->sum(saved.sums, 2 * C);
    if (dx.ptr != nullptr && batch > 0)
      detail::gpu_batch_norm_backward_dx(st, x, dy, dx, batch, C, HW, saved.mean, saved.invstd,
                                         gamma, saved.sums, count_slot(saved, C), precision);
    return;
  }
  kernels::with_storage(dy.dtype, [&](auto storage) {
    using T = decltype(storage);
    kernels::with_storage(dx.dtype, [&](auto dx_storage) {
      using D = decltype(dx_storage);
      cpu_backward(s, x.as<const T>(), dy.as<const T>(), dx.as<D>(), batch, gamma, saved, dgamma,
                   dbeta, accumulate, sync, precision);
    });
  });
}

}  // namespace ringtrain
