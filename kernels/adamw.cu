// AdamW update on the GPU: one fused kernel per step, arithmetic from adamw.cuh.
#include "core/cuda/check_cuda.h"
#include "kernels/adamw.cuh"
#include "kernels/adamw.h"
#include "kernels/decay_mask.cuh"
#include "kernels/nonfinite_guard.cuh"
#include "kernels/optim_launch.cuh"

namespace ringtrain::kernels {

namespace {

__global__ void adamw_f32_kernel(float* __restrict__ p, const float* __restrict__ g,
                                 float* __restrict__ m, float* __restrict__ v, std::size_t n,
                                 AdamWCoefficients c, const float* __restrict__ decay_mask,
                                 const NonfiniteGuardState* gate) {
  if (!nonfinite_gate_open(gate)) return;
  // Skipped steps were issued as no-ops: the bias correction counts the others.
  if (gate != nullptr && gate->skipped != 0)
    adamw_bias_correction(c, nonfinite_applied_steps(gate, c.step));
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    float pi = p[i];
    float mi = m[i];
    float vi = v[i];
    if (decay_select(decay_mask, i, 1.f, 0.f) != 0.f)
      adamw_element(pi, g[i], mi, vi, c);
    else
      adamw_element(pi, g[i], mi, vi, adamw_without_decay(c));
    p[i] = pi;
    m[i] = mi;
    v[i] = vi;
  }
}

}  // namespace

void adamw_f32_cuda(float* params, const float* grads, float* exp_avg, float* exp_avg_sq,
                    std::size_t n, const AdamWCoefficients& coefficients, const float* decay_mask,
                    const NonfiniteGuardState* gate, void* stream) {
  if (n == 0) return;
  adamw_f32_kernel<<<optim_blocks(n), kOptimThreads, 0, static_cast<cudaStream_t>(stream)>>>(
      params, grads, exp_avg, exp_avg_sq, n, coefficients, decay_mask, gate);
  RT_CUDA_CHECK_LAUNCH();
}

}  // namespace ringtrain::kernels
