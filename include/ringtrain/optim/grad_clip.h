// Gradient clipping by global L2 norm, and scaling of a buffer by a scalar.
// The norm is one number over the whole flat gradient buffer, accumulated in
// double in a fixed order, so the same gradients give the same norm bit for bit.
// In a distributed run the trainer calls these after the all-reduce: every rank
// then holds the same averaged gradients and computes the same norm and clip
// factor, with no extra communication, and the replicas stay identical.
#pragma once

#include "ringtrain/core/buffer_view.h"

namespace ringtrain {

// sqrt(sum of g^2) over an f32 buffer on CPU or CUDA (CUDA: waits for the
// result on the default stream).
double global_grad_norm(BufferView grads);

// Scales grads by max_norm / (norm + 1e-6) when norm > max_norm (as PyTorch's
// clip_grad_norm_ does) and returns the norm before clipping. A non-finite norm
// leaves the gradients untouched and is returned, so the caller can skip the
// step or stop; max_norm must be > 0 (--clip-grad-norm).
double clip_grad_norm(BufferView grads, double max_norm);

// buf *= factor, in place, for an f32 buffer on CPU or CUDA.
void scale_buffer(BufferView buf, float factor);

}  // namespace ringtrain
