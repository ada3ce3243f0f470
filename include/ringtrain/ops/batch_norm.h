// BatchNorm over the channels of NCHW float tensors (features: [N, F] is
// N x F x 1): training normalises with the batch's statistics and updates the
// running ones with PyTorch's semantics (momentum 0.1, the unbiased variance for
// the running estimate); evaluation uses the running statistics. Reductions run
// in a fixed order on both devices, so results repeat bit for bit.
//
// The batch may span ranks (--sync-bn): a BatchStatReducer sums the per-channel
// partial sums over the ranks in the middle of forward (CPU: sums, then squared
// deviations from the global mean; GPU: count * mean and the count, then each
// rank's M2 about the global mean) and of backward, so every rank normalises
// with the same global statistics.
#pragma once

#include <cstddef>

#include "ringtrain/core/buffer_view.h"
#include "ringtrain/ops/compute_context.h"

namespace ringtrain {

struct BatchNormShape {
  std::size_t channels = 0, inner = 1;  // inner: H * W (1 for features)
};

// Sums `count` floats over the ranks, in place, on the context's device and in
// its stream order (the host need not wait on a GPU).
class BatchStatReducer {
 public:
  virtual ~BatchStatReducer() = default;
  virtual void sum(float* data, std::size_t count) = 0;
};

// What a BatchNorm keeps between its forward and backward, on its device:
// mean[C], invstd[C], sums[2C + 1] (workspace; sums[2C] is the sample count).
struct BatchNormSaved {
  float* mean = nullptr;
  float* invstd = nullptr;
  float* sums = nullptr;
};

// Forward. gamma and beta are null without affine. running_* are read in
// evaluation and updated in training when update_running. With `sync`, the
// training statistics are those of the whole batch over the ranks. Under a
// bf16/fp16 context y is written on that 16-bit grid (as activations are stored).
void batch_norm_forward(const ComputeContext& ctx, const BatchNormShape& s, const float* x,
                        float* y, std::size_t batch, bool training, bool update_running, float eps,
                        float momentum, const float* gamma, const float* beta, float* running_mean,
                        float* running_var, const BatchNormSaved& saved,
                        BatchStatReducer* sync = nullptr);

// Backward of a training-mode forward. dx (if not null) overwritten, on the
// context's 16-bit grid under bf16/fp16 as y is; dgamma,
// dbeta (if not null) overwritten or added to, from this rank's samples (the
// gradient all-reduce sums them over the ranks).
void batch_norm_backward(const ComputeContext& ctx, const BatchNormShape& s, const float* x,
                         const float* dy, float* dx, std::size_t batch, const float* gamma,
                         const BatchNormSaved& saved, float* dgamma, float* dbeta, bool accumulate,
                         BatchStatReducer* sync = nullptr);

// The stored forms: x, y and dy are views of the model's storage dtype (f32,
// bf16, f16), dx of it or f32 (a null ptr: not wanted); the statistics and
// the arithmetic are fp32, each output rounded once. The fp32 forms above are
// these with f32 views.
void batch_norm_forward(const ComputeContext& ctx, const BatchNormShape& s, BufferView x,
                        BufferView y, std::size_t batch, bool training, bool update_running,
                        float eps, float momentum, const float* gamma, const float* beta,
                        float* running_mean, float* running_var, const BatchNormSaved& saved,
                        BatchStatReducer* sync = nullptr);
void batch_norm_backward(const ComputeContext& ctx, const BatchNormShape& s, BufferView x,
                         BufferView dy, BufferView dx, std::size_t batch, const float* gamma,
                         const BatchNormSaved& saved, float* dgamma, float* dbeta, bool accumulate,
                         BatchStatReducer* sync = nullptr);

}  // namespace ringtrain
