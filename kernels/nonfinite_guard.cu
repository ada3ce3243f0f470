// The --nonfinite check and decision on the GPU: a grid-stride scan for the
// first non-finite element (atomicMin, so any grid gives the same index) and
// single-thread kernels around the decision in nonfinite_guard.cuh.
#include "core/cuda/check_cuda.h"
#include "kernels/nonfinite_guard.cuh"
#include "kernels/nonfinite_guard.h"
#include "kernels/optim_launch.cuh"

namespace ringtrain::kernels {

namespace {

__global__ void first_nonfinite_kernel(const float* __restrict__ x, std::size_t n,
                                       unsigned long long offset, unsigned long long* first_bad) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x)
    if (nonfinite_value(x[i])) {
      atomicMin(first_bad, offset + i);
      return;  // later elements of this thread have higher indices
    }
}

__global__ void save_loss_kernel(NonfiniteGuardState* state, const double* loss_totals) {
  for (int k = 0; k < kGuardLossTotals; ++k) state->loss_before[k] = loss_totals[k];
}

__global__ void loss_check_kernel(NonfiniteGuardState* state, const double* loss_totals,
                                  float* poison) {
  if (!nonfinite_value(loss_totals[0])) return;
  state->local_loss_bad = 1;
  if (poison != nullptr) *poison = __int_as_float(0x7fc00000);  // quiet NaN
}

__global__ void decide_kernel(NonfiniteGuardState* state, NonfiniteGuardState* mirror,
                              unsigned long long step, unsigned long long max_skips,
                              unsigned long long samples, double* loss_totals) {
  nonfinite_guard_decide(*state, step, max_skips, samples, loss_totals);
  *mirror = *state;
}

}  // namespace

void first_nonfinite_index_f32_cuda(const float* x, std::size_t n, unsigned long long offset,
                                    unsigned long long* first_bad, void* stream) {
  if (n == 0) return;
  first_nonfinite_kernel<<<optim_blocks(n), kOptimThreads, 0, static_cast<cudaStream_t>(stream)>>>(
      x, n, offset, first_bad);
  RT_CUDA_CHECK_LAUNCH();
}

void nonfinite_save_loss_cuda(NonfiniteGuardState* state, const double* loss_totals, void* stream) {
  save_loss_kernel<<<1, 1, 0, static_cast<cudaStream_t>(stream)>>>(state, loss_totals);
  RT_CUDA_CHECK_LAUNCH();
}

void nonfinite_loss_check_cuda(NonfiniteGuardState* state, const double* loss_totals, float* poison,
                               void* stream) {
  loss_check_kernel<<<1, 1, 0, static_cast<cudaStream_t>(stream)>>>(state, loss_totals, poison);
  RT_CUDA_CHECK_LAUNCH();
}

void nonfinite_guard_decide_cuda(NonfiniteGuardState* state, NonfiniteGuardState* mirror,
                                 unsigned long long step, unsigned long long max_skips,
                                 unsigned long long samples, double* loss_totals, void* stream) {
  decide_kernel<<<1, 1, 0, static_cast<cudaStream_t>(stream)>>>(state, mirror, step, max_skips,
                                                                samples, loss_totals);
  RT_CUDA_CHECK_LAUNCH();
}

}  // namespace ringtrain::kernels
