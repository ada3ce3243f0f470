// The GPU half of BatchMixer::apply behind a plain signature: the CUDA build
// launches kernels/batch_mix.cu (src/data/cuda/batch_mix_gpu.cpp), the
// CPU-only build answers with an Error (batch_mix_nocuda.cpp).
#pragma once

#include <cstdint>

#include "kernels/batch_mix.cuh"

namespace ringtrain::detail {

void gpu_batch_mix(const float* x, const std::int32_t* labels, float* out, std::int32_t* second,
                   const kernels::BatchMix& m, void* stream);

}  // namespace ringtrain::detail
