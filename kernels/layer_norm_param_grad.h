// Host-side launcher for kernels/layer_norm_param_grad.cu: a LayerNorm's
// weight and bias gradients over its rows. Streams travel as void*.
#pragma once

#include <cstddef>

#include "ringtrain/core/dtype.h"

namespace ringtrain::kernels {

// dw (+)= sum over the rows of dy * xhat, db (+)= sum of dy, for x and dy of
// [rows, c] in storage dtype t and the forward's per-row mean and rstd: one
// channel reduction (kernels/channel_reduce.cuh) of both, in the order the
// bias gradient sums a [rows, c] tensor. `scratch` holds the reduction's
// slice partials (scratch_floats of them).
void layer_norm_param_grad_cuda(const void* x, const void* dy, DType t, const float* mean,
                                const float* rstd, std::size_t rows, std::size_t c, float* dw,
                                float* db, bool accumulate, float* scratch,
                                std::size_t scratch_floats, void* stream);

}  // namespace ringtrain::kernels
