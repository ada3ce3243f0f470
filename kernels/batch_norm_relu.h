// Host-side launchers for kernels/batch_norm_relu.cu: the elementwise and
// reduction passes of fused BatchNorm + (add +) ReLU over an [n, c, hw]
// tensor (NCHW; NHWC and features as [N*H*W, C, 1]). BatchNorm's statistics
// come from kernels/batch_norm.h's steps, as for the plain op. x, residual,
// y and dy are of the storage dtype t; dx and d_residual of their own (t or
// f32). Streams travel as void*.
#pragma once

#include <cstddef>

#include "ringtrain/core/dtype.h"

namespace ringtrain::kernels {

// y = relu(bn(x) [+ residual]) (residual null: none), each stored
// intermediate of the unfused ops rounded in a register as it was stored.
void batch_norm_relu_apply_cuda(const void* x, const void* residual, void* y, DType t,
                                std::size_t n, std::size_t c, std::size_t hw, const float* mean,
                                const float* invstd, const float* gamma, const float* beta,
                                DType precision, void* stream);
// As batch_norm_backward_reduce_cuda, of dy masked by y > 0: the same
// reduction (kernels/channel_reduce.cuh) in the same order; and d_residual
// (null: none; of t or fp32) = the masked dy, written as the reduction reads
// each element, so that the dx pass reads it in place of y and dy. y null
// (a forward without residual, t its precision): relu's mask from x, mean,
// invstd, gamma and beta again (bn_relu_output_sign), y's bits, and the
// passes read 2 bytes an element less. dy_addend (null: none; of t): the
// gradient's second term, dy + dy_addend as summed_dy rounds it.
void batch_norm_relu_backward_reduce_cuda(const void* x, const void* y, const void* dy,
                                          const void* dy_addend, DType t, void* d_residual,
                                          DType residual_type, std::size_t n, std::size_t c,
                                          std::size_t hw, const float* mean, const float* invstd,
                                          const float* gamma, const float* beta, float* sums,
                                          float* dgamma, float* dbeta, bool accumulate,
                                          float* scratch, std::size_t scratch_floats, void* stream);
// One pass: dx (null: not wanted) as batch_norm_backward_dx_cuda of the
// masked dy: read from d_residual where the reduction wrote it (not null),
// else from y (or, y null, as the reduction takes it) and dy (with
// dy_addend, as the reduction sums them).
void batch_norm_relu_backward_dx_cuda(const void* x, const void* y, const void* dy,
                                      const void* dy_addend, DType t, void* dx, DType dx_type,
                                      const void* d_residual, DType residual_type, std::size_t n,
                                      std::size_t c, std::size_t hw, const float* mean,
                                      const float* invstd, const float* gamma, const float* beta,
                                      const float* sums, const float* count_ptr, DType precision,
                                      void* stream);

}  // namespace ringtrain::kernels
