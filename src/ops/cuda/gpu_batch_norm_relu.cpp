// The GPU half of fused BatchNorm + (add +) ReLU: forwards to
// kernels/batch_norm_relu.h, with the handles' scratch for the reduction's
// partial sums, as the plain BatchNorm's.
#include "kernels/batch_norm_relu.h"
#include "ops/gpu_ops.h"
#include "ringtrain/core/check.h"

namespace ringtrain::detail {

void gpu_batch_norm_relu_apply(void* stream, BufferView x, BufferView residual, BufferView y,
                               std::size_t n, std::size_t c, std::size_t hw, const float* mean,
                               const float* invstd, const float* gamma, const float* beta,
                               DType precision) {
  kernels::batch_norm_relu_apply_cuda(x.ptr, residual.ptr, y.ptr, y.dtype, n, c, hw, mean, invstd,
                                      gamma, beta, precision, stream);
}
void gpu_batch_norm_relu_backward_reduce(const GpuHandles& h, BufferView x, BufferView y,
                                         BufferView dy, BufferView dy_addend, BufferView d_residual,
                                         std::size_t n, std::size_t c, std::size_t hw,
                                         const float* mean, const float* invstd, const float* gamma,
                                         const float* beta, float* sums, float* dgamma,
                                         float* dbeta, bool accumulate) {
  RT_CHECK(
      d_residual.ptr == nullptr || d_residual.dtype == dy.dtype || d_residual.dtype == DType::f32,
      "batch_norm_relu: a {} residual gradient of {} activations", dtype_name(d_residual.dtype),
      dtype_name(dy.dtype));
  RT_CHECK(dy_addend.ptr == nullptr || dy_addend.dtype == dy.dtype,
           "batch_norm_relu: a {} second term of a {} gradient", dtype_name(dy_addend.dtype),
           dtype_name(dy.dtype));
  kernels::batch_norm_relu_backward_reduce_cuda(x.ptr, y.ptr, dy.ptr, dy_addend.ptr, dy.dtype,
                                                d_residual.ptr, d_residual.dtype, n, c, hw, mean,
                                                invstd, gamma, beta, sums, dgamma, dbeta,
                                                accumulate, h.scratch, kGpuScratchFloats, h.stream);
}
void gpu_batch_norm_relu_backward_dx(void* stream, BufferView x, BufferView y, BufferView dy,
                                     BufferView dy_addend, BufferView dx, BufferView d_residual,
                                     std::size_t n, std::size_t c, std::size_t hw,
                                     const float* mean, const float* invstd, const float* gamma,
                                     const float* beta, const float* sums, const float* count,
                                     DType precision) {
  kernels::batch_norm_relu_backward_dx_cuda(
      x.ptr, y.ptr, dy.ptr, dy_addend.ptr, dy.dtype, dx.ptr, dx.dtype, d_residual.ptr,
      d_residual.dtype, n, c, hw, mean, invstd, gamma, beta, sums, count, precision, stream);
}

}  // namespace ringtrain::detail
