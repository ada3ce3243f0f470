// Per-channel bias of a [outer, channels, inner] activation (Linear: inner = 1;
// Conv2d: inner = H*W). Shared by kernels/bias.cu and src/ops/bias.cpp.
#pragma once

#include <cstddef>

#include "kernels/host_device.cuh"

namespace ringtrain::kernels {

RT_HD float bias_add_element(float y, float bias) { return y + bias; }

// The channel of flat element i.
RT_HD std::size_t bias_channel_of(std::size_t i, std::size_t channels, std::size_t inner) {
  return (i / inner) % channels;
}

// The gradient of one bias entry accumulated onto `previous` (0 to overwrite).
RT_HD float bias_grad_combine(float previous, float sum) { return previous + sum; }

}  // namespace ringtrain::kernels
