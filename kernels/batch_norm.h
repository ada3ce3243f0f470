// Host-side launchers for kernels/batch_norm.cu. Streams travel as void*.
// An [n, c, hw] tensor: NCHW (features: hw = 1), or NHWC as [N*H*W, C, 1]. The
// reductions sum in a fixed order (blocks over channel groups and row slices,
// the slices' partials in `scratch` when it holds them: kernels/batch_norm.cu),
// so results repeat bit for bit. The statistics
// come in steps, so that partial sums can be summed over ranks in between
// (--sync-bn): sums -> mean -> squared deviations -> invstd.
#pragma once

#include <cstddef>

#include "ringtrain/core/dtype.h"

namespace ringtrain::kernels {

// sums[i] = sum of x over (n, hw) for channel i < c; sums[c] = n * hw.
// x, y and dy are of the storage dtype t (f32, bf16, f16; kernels/storage.cuh),
// dx of dx_type (t, or f32); the arithmetic is fp32.
void batch_norm_sums_cuda(const void* x, DType t, std::size_t n, std::size_t c, std::size_t hw,
                          float* sums, float* scratch, std::size_t scratch_floats, void* stream);
// mean[i] = sums[i] / sums[c]; *count_keep = sums[c] (kept for finalize and backward).
void batch_norm_mean_cuda(const float* sums, std::size_t c, float* mean, float* count_keep,
                          void* stream);
// out[c] = sum of (x - mean[c])^2.
void batch_norm_sqdev_cuda(const void* x, DType t, std::size_t n, std::size_t c, std::size_t hw,
                           const float* mean, float* out, float* scratch,
                           std::size_t scratch_floats, void* stream);
// invstd[c] from sqdev[c] / count (count = *count_ptr); the running update too.
void batch_norm_finalize_cuda(const float* sqdev, const float* count_ptr, std::size_t c, float eps,
                              float momentum, bool update_running, const float* mean, float* invstd,
                              float* running_mean, float* running_var, void* stream);
// invstd[c] from the running variance, mean[c] = running mean: evaluation mode.
void batch_norm_eval_stats_cuda(const float* running_mean, const float* running_var, std::size_t c,
                                float eps, float* mean, float* invstd, void* stream);
// An fp32 y rounded to `precision`'s grid (fp32: as is), in the same pass.
void batch_norm_apply_cuda(const void* x, void* y, DType t, std::size_t n, std::size_t c,
                           std::size_t hw, const float* mean, const float* invstd,
                           const float* gamma, const float* beta, DType precision, void* stream);
// sums[0..c) = sum(dy), sums[c..2c) = sum(dy * xhat) of this rank's samples;
// dgamma/dbeta (if not null) overwritten or added to.
void batch_norm_backward_reduce_cuda(const void* x, const void* dy, DType t, std::size_t n,
                                     std::size_t c, std::size_t hw, const float* mean,
                                     const float* invstd, float* sums, float* dgamma, float* dbeta,
                                     bool accumulate, float* scratch, std::size_t scratch_floats,
                                     void* stream);
// dx from the (possibly all-ranks) sums and the batch's sample count *count_ptr.
void batch_norm_backward_dx_cuda(const void* x, const void* dy, DType t, void* dx, DType dx_type,
                                 std::size_t n, std::size_t c, std::size_t hw, const float* mean,
                                 const float* invstd, const float* gamma, const float* sums,
                                 const float* count_ptr, DType precision, void* stream);

// [N, C, HW] -> [N, C]: the mean over HW; backward spreads dy / HW.
// x, y, dy of the storage dtype t, dx of dx_type (t or f32).
void global_avg_pool_forward_cuda(const void* x, void* y, DType t, std::size_t planes,
                                  std::size_t hw, void* stream);
void global_avg_pool_backward_cuda(const void* dy, DType t, void* dx, DType dx_type,
                                   std::size_t planes, std::size_t hw, void* stream);

}  // namespace ringtrain::kernels
