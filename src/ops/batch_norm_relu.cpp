// Fused BatchNorm + (add +) ReLU on either device: BatchNorm's statistics and
// backward sums through the same steps as the plain op (ops/batch_norm_steps.h),
// the elementwise passes from kernels/batch_norm_relu.cuh.
#include "ringtrain/ops/batch_norm_relu.h"

#include <type_traits>

#include "kernels/batch_norm_relu.cuh"
#include "kernels/storage.cuh"
#include "ops/batch_norm_steps.h"
#include "ops/gpu_ops.h"
#include "ringtrain/core/check.h"

namespace ringtrain {

namespace {

// Calls f(std::integral_constant<DType, P>{}) for p: the CPU loops take the
// grid they round to as a constant, so that no test of it is left in them.
template <typename F>
void with_precision(DType p, F&& f) {
  switch (p) {
    case DType::bf16:
      return f(std::integral_constant<DType, DType::bf16>{});
    case DType::f16:
      return f(std::integral_constant<DType, DType::f16>{});
    default:
      return f(std::integral_constant<DType, DType::f32>{});
  }
}

// A channel's gamma and beta as the per-element functions read them (null
// without affine), copied out of the parameters: locals that no store can
// alias, so the loops below keep them in registers (and vectorise).
struct ChannelAffine {
  float gamma, beta;
  bool affine;
  ChannelAffine(const float* g, const float* b, std::size_t c)
      : gamma(g != nullptr ? g[c] : 1.0f), beta(b != nullptr ? b[c] : 0.0f), affine(g != nullptr) {}
  const float* gamma_ptr() const { return affine ? &gamma : nullptr; }
  const float* beta_ptr() const { return affine ? &beta : nullptr; }
};

// y = relu(bn(x) [+ r]) over the tensor, channel by channel.
template <bool kResidual, DType precision, typename T>
void cpu_apply(const BatchNormShape& s, const T* __restrict__ x, const T* __restrict__ r,
               T* __restrict__ y, std::size_t batch, const float* gamma, const float* beta,
               const BatchNormSaved& saved) {
  const std::size_t C = s.channels, HW = s.inner;
  for (std::size_t c = 0; c < C; ++c) {
    const float mean = saved.mean[c], invstd = saved.invstd[c];
    const ChannelAffine a(gamma, beta, c);
    const float* g = a.gamma_ptr();
    const float* b = a.beta_ptr();
    for (std::size_t n = 0; n < batch; ++n) {
      const std::size_t base = (n * C + c) * HW;
      for (std::size_t i = base; i < base + HW; ++i)
        kernels::store(y, i,
                       kernels::bn_relu_forward_element<T>(kernels::load(x, i), mean, invstd, g, b,
                                                           0, precision, kResidual,
                                                           kResidual ? kernels::load(r, i) : 0.0f));
    }
  }
}

}  // namespace

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
    if (training)
      detail::cpu_statistics(s, xs, batch, eps, momentum, update_running, running_mean, running_var,
                             saved, sync);
    else
      detail::cpu_eval_statistics(C, eps, running_mean, running_var, saved);
    with_precision(precision, [&](auto p) {
      constexpr DType P = decltype(p)::value;
      if (residual.ptr != nullptr)
        cpu_apply<true, P>(s, xs, residual.as<const T>(), y.as<T>(), batch, gamma, beta, saved);
      else
        cpu_apply<false, P>(s, xs, static_cast<const T*>(nullptr), y.as<T>(), batch, gamma, beta,
                            saved);
    });
  });
}

namespace {

// dy at i, or with its second term (kernels::summed_dy).
template <typename T>
float dy_at(const T* dy, const T* addend, std::size_t i) {
  return addend != nullptr ? kernels::summed_dy<T>(kernels::load(dy, i), kernels::load(addend, i))
                           : kernels::load(dy, i);
}

// The pass after the sums: dx (D: the storage type or f32) and the
// residual's gradient (R), each element's masked dy computed once for both;
// kDx / kResidual: whether each is wanted. y null: the mask from x again
// (kernels::bn_relu_output_sign); addend not null: dy + addend
// (kernels::summed_dy).
template <bool kDx, bool kResidual, DType precision, typename T, typename D, typename R>
void cpu_backward_outputs(const BatchNormShape& s, const T* __restrict__ x, const T* __restrict__ y,
                          const T* __restrict__ dy, const T* __restrict__ addend,
                          D* __restrict__ dx, R* __restrict__ d_residual, std::size_t batch,
                          const float* gamma, const float* beta, const BatchNormSaved& saved) {
  const std::size_t C = s.channels, HW = s.inner;
  const float count = *detail::count_slot(saved, C);
  for (std::size_t c = 0; c < C; ++c) {
    const ChannelAffine a(gamma, beta, c);
    const float g = a.gamma;
    const float mean = saved.mean[c], invstd = saved.invstd[c];
    const float sum_dy = saved.sums[c], sum_dy_xhat = saved.sums[C + c];
    for (std::size_t n = 0; n < batch; ++n) {
      const std::size_t base = (n * C + c) * HW;
      for (std::size_t i = base; i < base + HW; ++i) {
        const float xv = kernels::load(x, i);
        const float m = kernels::bn_relu_masked_dy(
            kernels::bn_relu_output_sign(y, i, xv, mean, invstd, a.gamma_ptr(), a.beta_ptr(), 0),
            dy_at(dy, addend, i));
        if constexpr (kDx)
          kernels::store(
              dx, i,
              kernels::round_to_precision_grid(
                  kernels::bn_backward_element(xv, m, mean, invstd, g, sum_dy, sum_dy_xhat, count),
                  precision));
        if constexpr (kResidual) kernels::store(d_residual, i, m);
      }
    }
  }
}

}  // namespace

void batch_norm_relu_backward(const ComputeContext& ctx, const BatchNormShape& s, BufferView x,
                              BufferView y, BufferView dy, BufferView dx, BufferView d_residual,
                              std::size_t batch, const float* gamma, const float* beta,
                              const BatchNormSaved& saved, float* dgamma, float* dbeta,
                              bool accumulate, BatchStatReducer* sync, BufferView dy_addend) {
  const std::size_t C = s.channels, HW = s.inner;
  const DType precision = ctx.precision();
  const bool outputs = (dx.ptr != nullptr || d_residual.ptr != nullptr) && batch > 0;
  // Without y, relu's mask is taken from BatchNorm's value before one
  // rounding to the storage type, which must then be the precision's grid.
  RT_CHECK(y.ptr != nullptr || dy.dtype == precision,
           "batch_norm_relu backward without y: {} activations under {} precision",
           dtype_name(dy.dtype), dtype_name(precision));
  // A residual's forward added it before relu: its mask needs the stored y.
  RT_CHECK(y.ptr != nullptr || d_residual.ptr == nullptr,
           "batch_norm_relu backward without y: a residual gradient asked for");
  RT_CHECK(dy_addend.ptr == nullptr || (dy_addend.dtype == dy.dtype && dy_addend.count >= dy.count),
           "batch_norm_relu backward: a second gradient term of {} {} for {} {}", dy_addend.count,
           dtype_name(dy_addend.dtype), dy.count, dtype_name(dy.dtype));
  if (ctx.is_cuda()) {
    // The reduction also writes d_residual (the masked dy), which the dx pass
    // then reads in place of y and dy.
    const BufferView no_residual{nullptr, 0, dy.dtype, dy.device};
    detail::gpu_batch_norm_relu_backward_reduce(
        detail::handles_of(ctx), x, y, dy, dy_addend, outputs ? d_residual : no_residual, batch, C,
        HW, saved.mean, saved.invstd, gamma, beta, saved.sums, dgamma, dbeta, accumulate);
    if (sync != nullptr) sync->sum(saved.sums, 2 * C);
    if (outputs)
      detail::gpu_batch_norm_relu_backward_dx(ctx.stream(), x, y, dy, dy_addend, dx, d_residual,
                                              batch, C, HW, saved.mean, saved.invstd, gamma, beta,
                                              saved.sums, detail::count_slot(saved, C), precision);
    return;
  }
  kernels::with_storage(dy.dtype, [&](auto storage) {
    using T = decltype(storage);
    const T* xs = x.as<const T>();
    const T* ys = y.as<const T>();
    const T* dys = dy.as<const T>();
    const T* adds = dy_addend.as<const T>();
    detail::cpu_backward_sums(
        s, xs, batch, saved, dgamma, dbeta, accumulate, sync,
        [&](std::size_t at, float xv, std::size_t c) {
          const ChannelAffine a(gamma, beta, c);
          return kernels::bn_relu_masked_dy(
              kernels::bn_relu_output_sign(ys, at, xv, saved.mean[c], saved.invstd[c],
                                           a.gamma_ptr(), a.beta_ptr(), 0),
              dy_at(dys, adds, at));
        });
    if (!outputs) return;
    // dx and d_residual default to T where absent, so that the dispatch
    // stays three ways each.
    kernels::with_storage_pair(dx.ptr != nullptr ? dx.dtype : dy.dtype,
                               d_residual.ptr != nullptr ? d_residual.dtype : dy.dtype,
                               [&](auto dx_storage, auto r_storage) {
                                 using D = decltype(dx_storage);
                                 using R = decltype(r_storage);
                                 D* dxs = dx.as<D>();
                                 R* drs = d_residual.as<R>();
                                 with_precision(precision, [&](auto p) {
                                   constexpr DType P = decltype(p)::value;
                                   if (dxs != nullptr && drs != nullptr)
                                     cpu_backward_outputs<true, true, P>(
                                         s, xs, ys, dys, adds, dxs, drs, batch, gamma, beta, saved);
                                   else if (dxs != nullptr)
                                     cpu_backward_outputs<true, false, P>(
                                         s, xs, ys, dys, adds, dxs, drs, batch, gamma, beta, saved);
                                   else
                                     cpu_backward_outputs<false, true, P>(
                                         s, xs, ys, dys, adds, dxs, drs, batch, gamma, beta, saved);
                                 });
                               });
  });
}

}  // namespace ringtrain
