// BatchNorm on the CPU: per channel, two passes for the statistics (mean, then
// the squared deviations) in double, then the same per-element functions as the
// CUDA kernels (kernels/batch_norm.cuh).
#include "ringtrain/ops/batch_norm.h"

#include "kernels/batch_norm.cuh"
#include "ops/gpu_ops.h"
#include "ringtrain/tensor/device_memory.h"

namespace ringtrain {

void batch_norm_forward(const ComputeContext& ctx, const BatchNormShape& s, const float* x,
                        float* y, std::size_t batch, bool training, bool update_running, float eps,
                        float momentum, const float* gamma, const float* beta, float* running_mean,
                        float* running_var, float* mean, float* invstd) {
  const std::size_t C = s.channels, HW = s.inner;
  if (batch == 0) return;
  if (ctx.is_cuda()) {
    if (training)
      detail::gpu_batch_norm_stats(ctx.stream(), x, batch, C, HW, eps, momentum, update_running,
                                   mean, invstd, running_mean, running_var);
    else
      detail::gpu_batch_norm_eval_stats(ctx.stream(), running_mean, running_var, C, eps, mean,
                                        invstd);
    detail::gpu_batch_norm_apply(ctx.stream(), x, y, batch, C, HW, mean, invstd, gamma, beta);
    return;
  }
  const double count = static_cast<double>(batch * HW);
  for (std::size_t c = 0; c < C; ++c) {
    if (training) {
      double sum = 0;
      for (std::size_t n = 0; n < batch; ++n) {
        const float* p = x + (n * C + c) * HW;
        for (std::size_t i = 0; i < HW; ++i) sum += p[i];
      }
      const double m = sum / count;
      double sq = 0;
      for (std::size_t n = 0; n < batch; ++n) {
        const float* p = x + (n * C + c) * HW;
        for (std::size_t i = 0; i < HW; ++i) sq += (p[i] - m) * (p[i] - m);
      }
      const float var = static_cast<float>(sq / count);
      mean[c] = static_cast<float>(m);
      invstd[c] = kernels::bn_invstd(var, eps);
      if (update_running) {
        running_mean[c] = kernels::bn_running_mean(running_mean[c], mean[c], momentum);
        running_var[c] =
            kernels::bn_running_var(running_var[c], var, static_cast<float>(count), momentum);
      }
    } else {
      mean[c] = running_mean[c];
      invstd[c] = kernels::bn_invstd(running_var[c], eps);
    }
    for (std::size_t n = 0; n < batch; ++n) {
      const float* p = x + (n * C + c) * HW;
      float* q = y + (n * C + c) * HW;
      for (std::size_t i = 0; i < HW; ++i)
        q[i] = kernels::bn_apply_element(p[i], mean[c], invstd[c], gamma, beta,
                                         static_cast<int>(c));
    }
  }
}

void batch_norm_backward(const ComputeContext& ctx, const BatchNormShape& s, const float* x,
                         const float* dy, float* dx, std::size_t batch, const float* gamma,
                         const float* mean, const float* invstd, float* sums, float* dgamma,
                         float* dbeta, bool accumulate) {
  const std::size_t C = s.channels, HW = s.inner;
  if (batch == 0) {
    if (!accumulate && dgamma != nullptr) device_zero(dgamma, sizeof(float) * C, ctx.device());
    if (!accumulate && dbeta != nullptr) device_zero(dbeta, sizeof(float) * C, ctx.device());
    return;
  }
  if (ctx.is_cuda())
    return detail::gpu_batch_norm_backward(ctx.stream(), x, dy, dx, batch, C, HW, mean, invstd,
                                           gamma, sums, dgamma, dbeta, accumulate);
  const float count = static_cast<float>(batch * HW);
  for (std::size_t c = 0; c < C; ++c) {
    double sum_dy = 0, sum_dy_xhat = 0;
    for (std::size_t n = 0; n < batch; ++n) {
      const float* xp = x + (n * C + c) * HW;
      const float* gp = dy + (n * C + c) * HW;
      for (std::size_t i = 0; i < HW; ++i) {
        sum_dy += gp[i];
        sum_dy_xhat += static_cast<double>(gp[i]) * (xp[i] - mean[c]) * invstd[c];
      }
    }
    sums[c] = static_cast<float>(sum_dy);
    sums[C + c] = static_cast<float>(sum_dy_xhat);
    if (dgamma != nullptr) dgamma[c] = (accumulate ? dgamma[c] : 0.0f) + sums[C + c];
    if (dbeta != nullptr) dbeta[c] = (accumulate ? dbeta[c] : 0.0f) + sums[c];
    if (dx == nullptr) continue;
    const float g = gamma != nullptr ? gamma[c] : 1.0f;
    for (std::size_t n = 0; n < batch; ++n) {
      const float* xp = x + (n * C + c) * HW;
      const float* gp = dy + (n * C + c) * HW;
      float* dp = dx + (n * C + c) * HW;
      for (std::size_t i = 0; i < HW; ++i)
        dp[i] = kernels::bn_backward_element(xp[i], gp[i], mean[c], invstd[c], g, sums[c],
                                             sums[C + c], count);
    }
  }
}

}  // namespace ringtrain
