// Pooling on a GPU: the kernels of kernels/pool2d.cu on the context's stream.
#include "kernels/pool2d.h"
#include "ops/gpu_ops.h"

namespace ringtrain::detail {

void gpu_pool2d_forward(void* stream, const kernels::PoolShape& shape, std::size_t channels,
                        bool max, bool nhwc, BufferView x, BufferView y, std::int32_t* argmax,
                        std::size_t batch) {
  kernels::pool2d_forward_cuda(x.ptr, y.ptr, y.dtype, argmax, batch, channels, shape, max, nhwc,
                               stream);
}

void gpu_pool2d_backward(void* stream, const kernels::PoolShape& shape, std::size_t channels,
                         bool max, bool nhwc, BufferView dy, const std::int32_t* argmax,
                         BufferView dx, std::size_t batch) {
  kernels::pool2d_backward_cuda(dy.ptr, dy.dtype, argmax, dx.ptr, dx.dtype, batch, channels, shape,
                                max, nhwc, stream);
}

}  // namespace ringtrain::detail
