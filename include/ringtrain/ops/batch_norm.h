// BatchNorm over the channels of NCHW float tensors (features: [N, F] is
// N x F x 1): training normalises with the batch's statistics and updates the
// running ones with PyTorch's semantics (momentum 0.1, the unbiased variance for
// the running estimate); evaluation uses the running statistics. Reductions run
// in a fixed order on both devices, so results repeat bit for bit.
#pragma once

#include <cstddef>

#include "ringtrain/ops/compute_context.h"

namespace ringtrain {

struct BatchNormShape {
  std::size_t channels = 0, inner = 1;  // inner: H * W (1 for features)
};

// Forward. mean/invstd (channels each) receive the statistics used, for the
// backward. gamma and beta are null without affine. running_* are read in
// evaluation and updated in training when update_running.
void batch_norm_forward(const ComputeContext& ctx, const BatchNormShape& s, const float* x,
                        float* y, std::size_t batch, bool training, bool update_running, float eps,
                        float momentum, const float* gamma, const float* beta, float* running_mean,
                        float* running_var, float* mean, float* invstd);

// Backward of a training-mode forward (batch statistics). dx (if not null)
// overwritten; dgamma, dbeta (if not null) overwritten or added to. sums is a
// 2 x channels workspace.
void batch_norm_backward(const ComputeContext& ctx, const BatchNormShape& s, const float* x,
                         const float* dy, float* dx, std::size_t batch, const float* gamma,
                         const float* mean, const float* invstd, float* sums, float* dgamma,
                         float* dbeta, bool accumulate);

}  // namespace ringtrain
