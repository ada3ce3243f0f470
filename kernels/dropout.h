// Host-side launchers for kernels/dropout.cu. Streams travel as void*.
#pragma once

#include <cstddef>
#include <cstdint>

namespace ringtrain::kernels {

// y[i] = x[i] * dropout_factor(key, dropout_mask_index(i, channels, hw), p,
// keep_scale); backward is the same with dy and dx (the mask is recomputed
// from the key). channels > 0: x is channels-last with hw pixels.
void dropout_apply_cuda(const float* x, float* y, std::size_t n, std::uint64_t key, float p,
                        float keep_scale, void* stream, std::size_t channels = 0,
                        std::size_t hw = 0);

}  // namespace ringtrain::kernels
