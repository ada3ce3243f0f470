// The trial operands' fill on the GPU, values from trial_pattern.cuh.
#include "core/cuda/check_cuda.h"
#include "kernels/launch_shape.cuh"
#include "kernels/storage.cuh"
#include "kernels/trial_pattern.cuh"
#include "kernels/trial_pattern.h"

namespace ringtrain::kernels {

namespace {
template <typename T>
__global__ void fill_trial_pattern_kernel(T* __restrict__ p, std::size_t count,
                                          std::uint32_t seed) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < count;
       i += stride)
    store(p, i, trial_pattern_value(i, seed));
}
}  // namespace

void fill_trial_pattern_cuda(void* p, DType t, std::size_t count, std::uint32_t seed,
                             void* stream) {
  if (count == 0) return;
  with_storage(t, [&](auto s) {
    using T = decltype(s);
    fill_trial_pattern_kernel<T>
        <<<elementwise_blocks(count), kElementwiseThreads, 0, static_cast<cudaStream_t>(stream)>>>(
            static_cast<T*>(p), count, seed);
  });
  RT_CUDA_CHECK_LAUNCH();
}

}  // namespace ringtrain::kernels
