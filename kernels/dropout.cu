#include "core/cuda/check_cuda.h"
#include "kernels/dropout.cuh"
#include "kernels/dropout.h"
#include "kernels/launch_shape.cuh"
#include "kernels/storage.cuh"

namespace ringtrain::kernels {

namespace {
template <typename T, typename D>
__global__ void dropout_apply_kernel(const T* __restrict__ x, D* __restrict__ y, std::size_t n,
                                     uint64_t key, float p, float keep_scale, std::size_t channels,
                                     std::size_t hw) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x)
    store(y, i,
          load(x, i) * dropout_factor(key, dropout_mask_index(i, channels, hw), p, keep_scale));
}
}  // namespace

void dropout_apply_cuda(const void* x, DType t, void* y, DType y_type, std::size_t n,
                        std::uint64_t key, float p, float keep_scale, void* stream,
                        std::size_t channels, std::size_t hw) {
  if (n == 0) return;
  with_storage_pair(t, y_type, [&](auto storage, auto y_storage) {
    using T = decltype(storage);
    using D = decltype(y_storage);
    dropout_apply_kernel<<<elementwise_blocks(n), kElementwiseThreads, 0,
                           static_cast<cudaStream_t>(stream)>>>(
        static_cast<const T*>(x), static_cast<D*>(y), n, key, p, keep_scale, channels, hw);
  });
  RT_CUDA_CHECK_LAUNCH();
}

}  // namespace ringtrain::kernels
