#include "core/cuda/check_cuda.h"
#include "kernels/activation.cuh"
#include "kernels/activation.h"
#include "kernels/launch_shape.cuh"

namespace ringtrain::kernels {

namespace {
#define RT_GRID_STRIDE(i, n)                                                                     \
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < (n); \
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x)

__global__ void relu_forward_kernel(const float* __restrict__ x, float* __restrict__ y,
                                    std::size_t n) {
  RT_GRID_STRIDE(i, n) y[i] = relu_forward_element(x[i]);
}
__global__ void relu_backward_kernel(const float* __restrict__ y, const float* __restrict__ dy,
                                     float* __restrict__ dx, std::size_t n) {
  RT_GRID_STRIDE(i, n) dx[i] = relu_backward_element(y[i], dy[i]);
}
__global__ void gelu_forward_kernel(const float* __restrict__ x, float* __restrict__ y,
                                    std::size_t n) {
  RT_GRID_STRIDE(i, n) y[i] = gelu_forward_element(x[i]);
}
__global__ void gelu_backward_kernel(const float* __restrict__ x, const float* __restrict__ dy,
                                     float* __restrict__ dx, std::size_t n) {
  RT_GRID_STRIDE(i, n) dx[i] = gelu_backward_element(x[i], dy[i]);
}
__global__ void gelu_tanh_forward_kernel(const float* __restrict__ x, float* __restrict__ y,
                                         std::size_t n) {
  RT_GRID_STRIDE(i, n) y[i] = gelu_tanh_forward_element(x[i]);
}
__global__ void gelu_tanh_backward_kernel(const float* __restrict__ x, const float* __restrict__ dy,
                                          float* __restrict__ dx, std::size_t n) {
  RT_GRID_STRIDE(i, n) dx[i] = gelu_tanh_backward_element(x[i], dy[i]);
}
#undef RT_GRID_STRIDE
}  // namespace

#define RT_LAUNCH_ELEMENTWISE(kernel, n, stream, ...)                                             \
  do {                                                                                            \
    if ((n) == 0) return;                                                                         \
    kernel<<<elementwise_blocks(n), kElementwiseThreads, 0, static_cast<cudaStream_t>(stream)>>>( \
        __VA_ARGS__);                                                                             \
    RT_CUDA_CHECK_LAUNCH();                                                                       \
  } while (0)

void relu_forward_cuda(const float* x, float* y, std::size_t n, void* stream) {
  RT_LAUNCH_ELEMENTWISE(relu_forward_kernel, n, stream, x, y, n);
}
void relu_backward_cuda(const float* y, const float* dy, float* dx, std::size_t n, void* stream) {
  RT_LAUNCH_ELEMENTWISE(relu_backward_kernel, n, stream, y, dy, dx, n);
}
void gelu_forward_cuda(const float* x, float* y, std::size_t n, void* stream) {
  RT_LAUNCH_ELEMENTWISE(gelu_forward_kernel, n, stream, x, y, n);
}
void gelu_backward_cuda(const float* x, const float* dy, float* dx, std::size_t n, void* stream) {
  RT_LAUNCH_ELEMENTWISE(gelu_backward_kernel, n, stream, x, dy, dx, n);
}
void gelu_tanh_forward_cuda(const float* x, float* y, std::size_t n, void* stream) {
  RT_LAUNCH_ELEMENTWISE(gelu_tanh_forward_kernel, n, stream, x, y, n);
}
void gelu_tanh_backward_cuda(const float* x, const float* dy, float* dx, std::size_t n,
                             void* stream) {
  RT_LAUNCH_ELEMENTWISE(gelu_tanh_backward_kernel, n, stream, x, dy, dx, n);
}
#undef RT_LAUNCH_ELEMENTWISE

}  // namespace ringtrain::kernels
