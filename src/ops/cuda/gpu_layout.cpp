// The GPU half of the layout ops: forwards to kernels/layout.h.
#include "kernels/layout.h"
#include "ops/gpu_ops.h"

namespace ringtrain::detail {

void gpu_transpose_batched(void* stream, const float* x, float* y, std::size_t batch,
                           std::size_t rows, std::size_t cols) {
  kernels::transpose_batched_cuda(x, y, batch, rows, cols, stream);
}
void gpu_global_avg_pool_nhwc_forward(void* stream, const float* x, float* y, std::size_t batch,
                                      std::size_t channels, std::size_t hw) {
  kernels::global_avg_pool_nhwc_forward_cuda(x, y, batch, channels, hw, stream);
}
void gpu_global_avg_pool_nhwc_backward(void* stream, const float* dy, float* dx, std::size_t batch,
                                       std::size_t channels, std::size_t hw) {
  kernels::global_avg_pool_nhwc_backward_cuda(dy, dx, batch, channels, hw, stream);
}

}  // namespace ringtrain::detail
