// The GPU half of the layout ops: forwards to kernels/layout.h.
#include "kernels/batch_norm.h"
#include "kernels/layout.h"
#include "ops/gpu_ops.h"

namespace ringtrain::detail {

void gpu_transpose_batched(void* stream, BufferView x, BufferView y, std::size_t batch,
                           std::size_t rows, std::size_t cols) {
  kernels::transpose_batched_cuda(x.ptr, x.dtype, y.ptr, y.dtype, batch, rows, cols, stream);
}
void gpu_global_avg_pool_forward(void* stream, BufferView x, BufferView y, std::size_t batch,
                                 std::size_t channels, std::size_t hw, bool nhwc) {
  if (nhwc)
    return kernels::global_avg_pool_nhwc_forward_cuda(x.ptr, y.ptr, y.dtype, batch, channels, hw,
                                                      stream);
  kernels::global_avg_pool_forward_cuda(x.ptr, y.ptr, y.dtype, batch * channels, hw, stream);
}
void gpu_global_avg_pool_backward(void* stream, BufferView dy, BufferView dx, std::size_t batch,
                                  std::size_t channels, std::size_t hw, bool nhwc) {
  if (nhwc)
    return kernels::global_avg_pool_nhwc_backward_cuda(dy.ptr, dy.dtype, dx.ptr, dx.dtype, batch,
                                                       channels, hw, stream);
  kernels::global_avg_pool_backward_cuda(dy.ptr, dy.dtype, dx.ptr, dx.dtype, batch * channels, hw,
                                         stream);
}

}  // namespace ringtrain::detail
