// Gradient buckets into and out of their 16-bit wire dtype on the GPU, one
// grid-stride pass each, arithmetic from wire_cast.cuh.
#include "core/cuda/check_cuda.h"
#include "kernels/optim_launch.cuh"
#include "kernels/wire_cast.cuh"
#include "kernels/wire_cast.h"

namespace ringtrain::kernels {

namespace {

__global__ void narrow_to_wire_kernel(const float* __restrict__ grads,
                                      std::uint16_t* __restrict__ wire, std::size_t n, float scale,
                                      bool bf16) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x)
    wire[i] = narrow_to_wire(grads[i], scale, bf16);
}

__global__ void widen_from_wire_kernel(const std::uint16_t* __restrict__ wire,
                                       float* __restrict__ grads, std::size_t n, bool bf16) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x)
    grads[i] = widen_from_wire(wire[i], bf16);
}

}  // namespace

void narrow_to_wire_cuda(const float* grads, std::uint16_t* wire, std::size_t n, float scale,
                         bool bf16, void* stream) {
  if (n == 0) return;
  narrow_to_wire_kernel<<<optim_blocks(n), kOptimThreads, 0, static_cast<cudaStream_t>(stream)>>>(
      grads, wire, n, scale, bf16);
  RT_CUDA_CHECK_LAUNCH();
}

void widen_from_wire_cuda(const std::uint16_t* wire, float* grads, std::size_t n, bool bf16,
                          void* stream) {
  if (n == 0) return;
  widen_from_wire_kernel<<<optim_blocks(n), kOptimThreads, 0, static_cast<cudaStream_t>(stream)>>>(
      wire, grads, n, bf16);
  RT_CUDA_CHECK_LAUNCH();
}

}  // namespace ringtrain::kernels
