// Host-side launchers for kernels/dropout.cu. Streams travel as void*.
#pragma once

#include <cstddef>
#include <cstdint>

#include "ringtrain/core/dtype.h"

namespace ringtrain::kernels {

// y[i] = x[i] * dropout_factor(key, dropout_mask_index(i, channels, hw), p,
// keep_scale); backward is the same with dy and dx (the mask is recomputed
// from the key). channels > 0: x is channels-last with hw pixels. x is of the
// storage dtype t, y of y_type (t, or f32 for a gradient the model sums).
void dropout_apply_cuda(const void* x, DType t, void* y, DType y_type, std::size_t n,
                        std::uint64_t key, float p, float keep_scale, void* stream,
                        std::size_t channels = 0, std::size_t hw = 0);

}  // namespace ringtrain::kernels
