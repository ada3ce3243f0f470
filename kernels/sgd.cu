// SGD updates on the GPU: one fused kernel per step, arithmetic from sgd.cuh.
#include "core/cuda/check_cuda.h"
#include "kernels/decay_mask.cuh"
#include "kernels/nonfinite_guard.cuh"
#include "kernels/optim_launch.cuh"
#include "kernels/sgd.cuh"
#include "kernels/sgd.h"

namespace ringtrain::kernels {

namespace {

__global__ void sgd_plain_f32_kernel(float* __restrict__ p, const float* __restrict__ g,
                                     std::size_t n, float lr, float weight_decay,
                                     const float* __restrict__ decay_mask,
                                     const NonfiniteGuardState* gate) {
  if (!nonfinite_gate_open(gate)) return;
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x)
    p[i] = sgd_plain_element(p[i], g[i], lr, decay_select(decay_mask, i, weight_decay, 0.f));
}

template <bool kNesterov>
__global__ void sgd_momentum_f32_kernel(float* __restrict__ p, const float* __restrict__ g,
                                        float* __restrict__ buf, std::size_t n, float lr,
                                        float momentum, float weight_decay,
                                        const float* __restrict__ decay_mask,
                                        const NonfiniteGuardState* gate) {
  if (!nonfinite_gate_open(gate)) return;
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    float pi = p[i];
    float bi = buf[i];
    sgd_momentum_element<kNesterov>(pi, g[i], bi, lr, momentum,
                                    decay_select(decay_mask, i, weight_decay, 0.f));
    p[i] = pi;
    buf[i] = bi;
  }
}

}  // namespace

void sgd_plain_f32_cuda(float* params, const float* grads, std::size_t n, float lr,
                        float weight_decay, const float* decay_mask,
                        const NonfiniteGuardState* gate, void* stream) {
  if (n == 0) return;
  sgd_plain_f32_kernel<<<optim_blocks(n), kOptimThreads, 0, static_cast<cudaStream_t>(stream)>>>(
      params, grads, n, lr, weight_decay, decay_mask, gate);
  RT_CUDA_CHECK_LAUNCH();
}

void sgd_momentum_f32_cuda(float* params, const float* grads, float* momentum_buf, std::size_t n,
                           float lr, float momentum, float weight_decay, bool nesterov,
                           const float* decay_mask, const NonfiniteGuardState* gate, void* stream) {
  if (n == 0) return;
  const cudaStream_t s = static_cast<cudaStream_t>(stream);
  if (nesterov)
    sgd_momentum_f32_kernel<true><<<optim_blocks(n), kOptimThreads, 0, s>>>(
        params, grads, momentum_buf, n, lr, momentum, weight_decay, decay_mask, gate);
  else
    sgd_momentum_f32_kernel<false><<<optim_blocks(n), kOptimThreads, 0, s>>>(
        params, grads, momentum_buf, n, lr, momentum, weight_decay, decay_mask, gate);
  RT_CUDA_CHECK_LAUNCH();
}

}  // namespace ringtrain::kernels
