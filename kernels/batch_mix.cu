// Mixup and CutMix of a batch on the GPU, on the model's compute stream after
// the batch is resident; arithmetic from batch_mix.cuh, the same functions
// the CPU path runs.
#include "core/cuda/check_cuda.h"
#include "kernels/batch_mix.cuh"
#include "kernels/batch_mix.h"
#include "kernels/launch_shape.cuh"

namespace ringtrain::kernels {

namespace {
// Grid-stride over the batch's elements; the first `rows` threads of the
// walk also write the second labels.
__global__ void batch_mix_kernel(const float* __restrict__ x,
                                 const std::int32_t* __restrict__ labels, float* __restrict__ out,
                                 std::int32_t* __restrict__ second, BatchMix m) {
  const std::size_t n = static_cast<std::size_t>(m.rows) * m.sample;
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += stride) {
    const auto row = static_cast<std::uint32_t>(i / m.sample);
    out[i] = mixed_element(x, i, mix_partner(row, m.rows, m.key), m);
  }
  for (std::size_t r = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; r < m.rows;
       r += stride)
    second[r] = labels[mix_partner(static_cast<std::uint32_t>(r), m.rows, m.key)];
}
}  // namespace

void batch_mix_cuda(const float* x, const std::int32_t* labels, float* out, std::int32_t* second,
                    const BatchMix& m, void* stream) {
  if (m.rows == 0) return;
  const std::size_t n = std::max<std::size_t>(static_cast<std::size_t>(m.rows) * m.sample, m.rows);
  batch_mix_kernel<<<elementwise_blocks(n), kElementwiseThreads, 0,
                     static_cast<cudaStream_t>(stream)>>>(x, labels, out, second, m);
  RT_CUDA_CHECK_LAUNCH();
}

}  // namespace ringtrain::kernels
