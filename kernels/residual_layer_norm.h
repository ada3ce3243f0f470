// Host-side launchers for kernels/residual_layer_norm.cu: a residual add fused
// with the LayerNorm that reads its sum, one warp per row of c, as the plain
// layer_norm kernels (kernels/transformer.h). x0, x1, sum, y and dy are of
// the storage dtype t; the sum's gradient and the inputs' gradients of their
// own (t or f32). Streams travel as void*.
#pragma once

#include <cstddef>

#include "ringtrain/core/dtype.h"

namespace ringtrain::kernels {

// sum = x0 + scale x1 (stored), y = layer_norm(sum), the row's mean and 1/std.
void residual_layer_norm_forward_cuda(const void* x0, const void* x1, float scale, DType t,
                                      const float* w, const float* b, std::size_t rows,
                                      std::size_t c, float eps, void* sum, void* y, float* mean,
                                      float* rstd, void* stream);
// LayerNorm's backward over the stored sum (its weight and bias gradients
// are kernels/layer_norm_param_grad.h's): the sum's gradient g = LayerNorm's
// dx added to d_sum where `summed`, rounded to t; dx0 = g, dx1 = scale g
// (each skipped when null).
void residual_layer_norm_backward_cuda(const void* sum, DType t, const float* w, const void* dy,
                                       std::size_t rows, std::size_t c, const float* mean,
                                       const float* rstd, const void* d_sum, DType d_sum_type,
                                       bool summed, float scale, void* dx0, DType dx0_type,
                                       void* dx1, DType dx1_type, void* stream);

}  // namespace ringtrain::kernels
