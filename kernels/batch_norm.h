// Host-side launchers for kernels/batch_norm.cu. Streams travel as void*.
// Layout NCHW (features: HW = 1); one thread block per channel for the
// reductions, in a fixed order, so results repeat bit for bit.
#pragma once

#include <cstddef>

namespace ringtrain::kernels {

// mean[c], invstd[c] of the batch; with update_running, the running statistics too.
void batch_norm_stats_cuda(const float* x, std::size_t n, std::size_t c, std::size_t hw, float eps,
                           float momentum, bool update_running, float* mean, float* invstd,
                           float* running_mean, float* running_var, void* stream);
// invstd[c] from the running variance, mean[c] = running mean: evaluation mode.
void batch_norm_eval_stats_cuda(const float* running_mean, const float* running_var,
                                std::size_t c, float eps, float* mean, float* invstd, void* stream);
void batch_norm_apply_cuda(const float* x, float* y, std::size_t n, std::size_t c, std::size_t hw,
                           const float* mean, const float* invstd, const float* gamma,
                           const float* beta, void* stream);
// sums[0..c) = sum(dy), sums[c..2c) = sum(dy * xhat); dgamma/dbeta (if not
// null) overwritten or added to.
void batch_norm_backward_reduce_cuda(const float* x, const float* dy, std::size_t n, std::size_t c,
                                     std::size_t hw, const float* mean, const float* invstd,
                                     float* sums, float* dgamma, float* dbeta, bool accumulate,
                                     void* stream);
void batch_norm_backward_dx_cuda(const float* x, const float* dy, float* dx, std::size_t n,
                                 std::size_t c, std::size_t hw, const float* mean,
                                 const float* invstd, const float* gamma, const float* sums,
                                 void* stream);

// [N, C, HW] -> [N, C]: the mean over HW; backward spreads dy / HW.
void global_avg_pool_forward_cuda(const float* x, float* y, std::size_t planes, std::size_t hw,
                                  void* stream);
void global_avg_pool_backward_cuda(const float* dy, float* dx, std::size_t planes, std::size_t hw,
                                   void* stream);

}  // namespace ringtrain::kernels
