// Mixup and CutMix of a batch on the GPU, on the model's compute stream after
// the batch is resident; arithmetic from batch_mix.cuh, the same functions
// the CPU path runs.
#include <algorithm>

#include "core/cuda/check_cuda.h"
#include "kernels/batch_mix.cuh"
#include "kernels/batch_mix.h"
#include "kernels/launch_shape.cuh"

namespace ringtrain::kernels {

namespace {
// One row per blockIdx.y (striding over rows), its elements spread over
// blockIdx.x and the threads: each thread finds its row's partner once.
__global__ void batch_mix_kernel(const float* __restrict__ x,
                                 const std::int32_t* __restrict__ labels, float* __restrict__ out,
                                 std::int32_t* __restrict__ second, BatchMix m) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::uint32_t r = blockIdx.y; r < m.rows; r += gridDim.y) {
    const std::uint32_t p = mix_partner(r, m.rows, m.key);
    if (blockIdx.x == 0 && threadIdx.x == 0) second[r] = labels[p];
    const std::size_t base = static_cast<std::size_t>(r) * m.sample;
    for (std::size_t e = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
         e < m.sample; e += stride)
      out[base + e] = mixed_element(x, base + e, p, m);
  }
}
}  // namespace

void batch_mix_cuda(const float* x, const std::int32_t* labels, float* out, std::int32_t* second,
                    const BatchMix& m, void* stream) {
  if (m.rows == 0) return;
  const dim3 grid(static_cast<unsigned>(std::clamp<std::size_t>(
                      (m.sample + kElementwiseThreads - 1) / kElementwiseThreads, 1, 1024)),
                  std::min<unsigned>(m.rows, 65535u));
  batch_mix_kernel<<<grid, kElementwiseThreads, 0, static_cast<cudaStream_t>(stream)>>>(
      x, labels, out, second, m);
  RT_CUDA_CHECK_LAUNCH();
}

}  // namespace ringtrain::kernels
