// Host-side launchers for kernels/batch_norm.cu. Streams travel as void*.
// An [n, c, hw] tensor: NCHW (features: hw = 1), or NHWC as [N*H*W, C, 1]. The
// reductions merge their partials in a fixed order (blocks over channel groups
// and row slices, the slices' partials in `scratch` when it holds them), so
// results repeat bit for bit. The training statistics read x once (Welford
// partials merged by Chan's formula: kernels/batch_norm_welford.cuh) and come
// in steps, so that partials can be summed over ranks in between (--sync-bn):
// one pass -> [sum over ranks -> global mean -> sum over ranks] -> invstd.
#pragma once

#include <cstddef>

#include "ringtrain/core/dtype.h"

namespace ringtrain::kernels {

// The one pass over x, whose storage dtype t is f32, bf16 or f16
// (kernels/storage.cuh), in fp32: per channel i < c, mean[i] and m2[i] (the
// sum of squared deviations from mean[i]) over (n, hw); *count_keep = n * hw.
// With `sums` (not null; --sync-bn) also sums[i] = n * hw * mean[i] and
// sums[c] = n * hw. x, y and dy below are of the storage dtype t too, dx of
// dx_type (t, or f32); the arithmetic is fp32.
void batch_norm_welford_cuda(const void* x, DType t, std::size_t n, std::size_t c, std::size_t hw,
                             float* mean, float* m2, float* count_keep, float* sums, float* scratch,
                             std::size_t scratch_floats, void* stream);
// --sync-bn, after sums[0, c] was summed over the ranks: mean[i] (this rank's)
// becomes the global mean sums[i] / sums[c], sums[i] this rank's term of the
// global M2 (m2[i] + local_count * (its mean - the global mean)^2), to be
// summed over the ranks; *count_keep = sums[c].
void batch_norm_welford_ranks_cuda(float* sums, std::size_t c, float local_count, float* mean,
                                   const float* m2, float* count_keep, void* stream);
// invstd[c] from m2[c] / count (count = *count_ptr): m2 is the M2 of
// the one pass, or the sum over the ranks; it may be invstd itself. The
// running update too.
void batch_norm_finalize_cuda(const float* m2, const float* count_ptr, std::size_t c, float eps,
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
