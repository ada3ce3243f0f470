// Gradient clipping with the norm on the device: every thread computes the
// same factor from the sum of squares that kernels/grad_norm.cu left in
// device memory (and ZeRO-1 all-reduced there), so a clipped step needs no
// host sync. Arithmetic from grad_clip.cuh and scale.cuh.
#include "core/cuda/check_cuda.h"
#include "kernels/grad_clip.cuh"
#include "kernels/grad_clip.h"
#include "kernels/optim_launch.cuh"
#include "kernels/scale.cuh"

namespace ringtrain::kernels {

namespace {

__global__ void clip_by_norm_kernel(float* __restrict__ x, std::size_t n,
                                    const double* __restrict__ sum_squares, double max_norm) {
  const float factor = clip_factor_of_sum(*sum_squares, max_norm);
  if (factor == 1.f) return;
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x)
    x[i] = scale_element(x[i], factor);
}

__global__ void finite_probe_kernel(const double* __restrict__ sum_squares,
                                    float* __restrict__ probe) {
  *probe = finite_probe(*sum_squares);
}

}  // namespace

void clip_by_norm_f32_cuda(float* x, std::size_t n, const double* sum_squares, double max_norm,
                           void* stream) {
  if (n == 0) return;
  clip_by_norm_kernel<<<optim_blocks(n), kOptimThreads, 0, static_cast<cudaStream_t>(stream)>>>(
      x, n, sum_squares, max_norm);
  RT_CUDA_CHECK_LAUNCH();
}

void finite_probe_cuda(const double* sum_squares, float* probe, void* stream) {
  finite_probe_kernel<<<1, 1, 0, static_cast<cudaStream_t>(stream)>>>(sum_squares, probe);
  RT_CUDA_CHECK_LAUNCH();
}

}  // namespace ringtrain::kernels
