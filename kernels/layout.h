// Host-side launchers for kernels/layout.cu. Streams travel as void*.
#pragma once

#include <cstddef>

#include "ringtrain/core/dtype.h"

namespace ringtrain::kernels {

// y = x transposed per batch item: [batch, rows, cols] -> [batch, cols, rows]
// (kernels/layout.cuh), x and y of storage dtypes each (f32, bf16, f16;
// narrowing rounds, widening is exact). y must not overlap x.
void transpose_batched_cuda(const void* x, DType x_type, void* y, DType y_type, std::size_t batch,
                            std::size_t rows, std::size_t cols, void* stream);

// Global average pool over channels-last [N, H*W, C]: y[n, c] is the mean of
// the pixels, summed in pixel order as the NCHW kernel sums them.
// x, y, dy of the storage dtype t, dx of dx_type (t or f32).
void global_avg_pool_nhwc_forward_cuda(const void* x, void* y, DType t, std::size_t batch,
                                       std::size_t channels, std::size_t hw, void* stream);
void global_avg_pool_nhwc_backward_cuda(const void* dy, DType t, void* dx, DType dx_type,
                                        std::size_t batch, std::size_t channels, std::size_t hw,
                                        void* stream);

}  // namespace ringtrain::kernels
