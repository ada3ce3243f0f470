// The GPU half of fused residual add + LayerNorm: forwards to
// kernels/residual_layer_norm.h.
#include "kernels/residual_layer_norm.h"
#include "ops/gpu_ops.h"

namespace ringtrain::detail {

void gpu_residual_layer_norm_forward(void* stream, BufferView x0, BufferView x1, float scale,
                                     const float* w, const float* b, std::size_t rows,
                                     std::size_t c, float eps, BufferView sum, BufferView y,
                                     float* mean, float* rstd) {
  kernels::residual_layer_norm_forward_cuda(x0.ptr, x1.ptr, scale, y.dtype, w, b, rows, c, eps,
                                            sum.ptr, y.ptr, mean, rstd, stream);
}
void gpu_residual_layer_norm_backward(void* stream, BufferView sum, const float* w, BufferView dy,
                                      std::size_t rows, std::size_t c, const float* mean,
                                      const float* rstd, BufferView d_sum, bool summed, float scale,
                                      BufferView dx0, BufferView dx1) {
  kernels::residual_layer_norm_backward_cuda(sum.ptr, dy.dtype, w, dy.ptr, rows, c, mean, rstd,
                                             d_sum.ptr, d_sum.dtype, summed, scale, dx0.ptr,
                                             dx0.dtype, dx1.ptr, dx1.dtype, stream);
}

}  // namespace ringtrain::detail
