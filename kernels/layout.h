// Host-side launchers for kernels/layout.cu. Streams travel as void*.
#pragma once

#include <cstddef>

namespace ringtrain::kernels {

// y = x transposed per batch item: [batch, rows, cols] -> [batch, cols, rows]
// (kernels/layout.cuh). y must not overlap x.
void transpose_batched_cuda(const float* x, float* y, std::size_t batch, std::size_t rows,
                            std::size_t cols, void* stream);

// Global average pool over channels-last [N, H*W, C]: y[n, c] is the mean of
// the pixels, summed in pixel order as the NCHW kernel sums them.
void global_avg_pool_nhwc_forward_cuda(const float* x, float* y, std::size_t batch,
                                       std::size_t channels, std::size_t hw, void* stream);
void global_avg_pool_nhwc_backward_cuda(const float* dy, float* dx, std::size_t batch,
                                        std::size_t channels, std::size_t hw, void* stream);

}  // namespace ringtrain::kernels
