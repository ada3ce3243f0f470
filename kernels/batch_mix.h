// Host-side launcher for kernels/batch_mix.cu. Streams travel as void*.
#pragma once

#include <cstdint>

#include "kernels/batch_mix.cuh"

namespace ringtrain::kernels {

// out = the mixed batch (m.rows x m.sample floats, mixed_element) and
// second[r] = labels[mix_partner(r)], from x and labels (all on the device),
// on `stream` (a cudaStream_t). out must not overlap x.
void batch_mix_cuda(const float* x, const std::int32_t* labels, float* out, std::int32_t* second,
                    const BatchMix& m, void* stream);

}  // namespace ringtrain::kernels
