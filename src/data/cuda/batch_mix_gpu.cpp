// CUDA build: BatchMixer's GPU half is the kernel of kernels/batch_mix.cu.
#include "data/batch_mix_gpu.h"

#include "kernels/batch_mix.h"

namespace ringtrain::detail {

void gpu_batch_mix(const float* x, const std::int32_t* labels, float* out, std::int32_t* second,
                   const kernels::BatchMix& m, void* stream) {
  kernels::batch_mix_cuda(x, labels, out, second, m, stream);
}

}  // namespace ringtrain::detail
