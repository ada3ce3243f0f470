// Host-side launchers for kernels/layout.cu. Streams travel as void*.
#pragma once

#include <cstddef>

#include "ringtrain/core/dtype.h"

namespace ringtrain::kernels {

// y = x transposed per batch item: [batch, rows, cols] -> [batch, cols, rows]
// (kernels/layout.cuh). y must not overlap x.
void transpose_batched_cuda(const float* x, float* y, std::size_t batch, std::size_t rows,
                            std::size_t cols, void* stream);

// Global average pool over channels-last [N, H*W, C]: y[n, c] is the mean of
// the pixels, summed in pixel order as the NCHW kernel sums them.
// x, y, dy of the storage dtype t, dx of dx_type (t or f32).
void global_avg_pool_nhwc_forward_cuda(const void* x, void* y, DType t, std::size_t batch,
                                       std::size_t channels, std::size_t hw, void* stream);
void global_avg_pool_nhwc_backward_cuda(const void* dy, DType t, void* dx, DType dx_type,
                                        std::size_t batch, std::size_t channels, std::size_t hw,
                                        void* stream);

}  // namespace ringtrain::kernels
