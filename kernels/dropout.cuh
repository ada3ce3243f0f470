// Dropout masks from a counter-based hash: element i of a step keeps or drops
// as a pure function of (seed, rank, step, layer, i). No RNG state travels, the
// mask is recomputed in backward instead of stored, and the CPU and GPU draw
// the very same mask. Shared by kernels/dropout.cu and src/ops/dropout.cpp.
#pragma once

#include <stdint.h>

#include "kernels/host_device.cuh"

namespace ringtrain::kernels {

// SplitMix64's finaliser: a bijective 64-bit mix with full avalanche.
RT_HD uint64_t mix64(uint64_t z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

RT_HD uint64_t dropout_key(uint64_t seed, uint64_t rank, uint64_t step, uint64_t layer) {
  return mix64(mix64(mix64(mix64(seed) ^ rank) ^ step) ^ layer);
}

// The index whose mask element i takes: i itself, or for a channels-last
// activation (channels > 0, hw pixels per channel) its NCHW index, so that
// NHWC and NCHW draw the same mask for each (n, c, h, w).
RT_HD uint64_t dropout_mask_index(uint64_t i, uint64_t channels, uint64_t hw) {
  if (channels == 0) return i;
  const uint64_t per_sample = channels * hw, n = i / per_sample, r = i % per_sample;
  return (n * channels + r % channels) * hw + r / channels;
}

// 0 with probability p, else keep_scale = 1 / (1 - p) (inverted dropout, so
// evaluation needs no rescaling). The uniform draw uses the top 24 bits.
RT_HD float dropout_factor(uint64_t key, uint64_t index, float p, float keep_scale) {
  const uint64_t h = mix64(key ^ (index * 0xD1B54A32D192ED03ull));
  const float u = static_cast<float>(h >> 40) * (1.0f / 16777216.0f);
  return u < p ? 0.0f : keep_scale;
}

}  // namespace ringtrain::kernels
