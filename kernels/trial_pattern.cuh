// The values a convolution's candidate engines are timed on (gpu_conv_plan.cpp),
// one element each: shared by kernels/trial_pattern.cu, which fills the trial
// operands, and the host's double-precision sums that a weight-gradient
// candidate's result is checked against (ops/wgrad_spot_check.h), which
// compute the same values again instead of reading the operands back.
#pragma once

#include <cstdint>

#include "kernels/host_device.cuh"

namespace ringtrain::kernels {

// Element `index` of the operand `seed`: an integer hash of both, mapped to
// one of the 33 values -16/64 ... 16/64. Zero mean, so a weight gradient's
// sums grow as the square root of their terms and a result from the wrong
// elements (a wrong stride, order or tap) is as large as the right one but
// unrelated to it; multiples of 1/64 in [-1/4, 1/4], so every value is exact
// in bf16 and fp16 and every product exact in fp32.
RT_HD float trial_pattern_value(std::uint64_t index, std::uint32_t seed) {
  std::uint32_t h = static_cast<std::uint32_t>(index) ^
                    (static_cast<std::uint32_t>(index >> 32) * 0x9E3779B9u) ^ (seed * 0x85EBCA6Bu);
  // A 32-bit finaliser (MurmurHash3's): every input bit moves every output bit.
  h ^= h >> 16;
  h *= 0x7FEB352Du;
  h ^= h >> 15;
  h *= 0x846CA68Bu;
  h ^= h >> 16;
  return static_cast<float>(static_cast<int>(h % 33u) - 16) * (1.0f / 64.0f);
}

}  // namespace ringtrain::kernels
