// --no-decay: which elements weight decay applies to. A mask is an f32 array
// of 0s and 1s over the flat parameter buffer (nullptr: every element
// decays). The decayed value is selected, not multiplied by the mask, so an
// element under the mask updates bit for bit as with weight decay 0, and the
// others as without a mask. Shared by the SGD and AdamW kernels and loops.
#pragma once

#include <cstddef>

#include "kernels/host_device.cuh"

namespace ringtrain::kernels {

// `decayed` where element i decays, `plain` where the mask exempts it.
RT_HD float decay_select(const float* mask, std::size_t i, float decayed, float plain) {
  return mask == nullptr || mask[i] != 0.f ? decayed : plain;
}

}  // namespace ringtrain::kernels
