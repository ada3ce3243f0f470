// Division of 32-bit unsigned integers by a divisor fixed at launch, as a
// multiply-high, an add and a shift (the round-up method of "Division by
// Invariant Integers using Multiplication", Granlund and Montgomery, 1994).
// A GPU has no integer divider: n / d by a runtime d is a software routine of
// about 20 instructions in 32 bits (far more in 64), which makes an
// elementwise kernel that finds each element's channel compute-bound. Exact
// for every n and every d >= 1 (tests/model/fast_divide_test.cpp checks it on
// the CPU, where the same functions run).
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/host_device.cuh"

namespace ringtrain::kernels {

struct FastDivide {
  std::uint32_t divisor = 1;
  std::uint32_t multiplier = 1;  // floor(2^32 (2^shift - d) / d) + 1
  std::uint32_t shift = 0;       // ceil(log2 d)

  FastDivide() = default;
  // d >= 1 (0 is taken as 1: callers guard empty shapes before launching).
  explicit FastDivide(std::uint32_t d) : divisor(d == 0 ? 1 : d) {
    while ((std::uint64_t{1} << shift) < divisor) ++shift;
    const std::uint64_t two_to_shift = std::uint64_t{1} << shift;
    multiplier = static_cast<std::uint32_t>(((two_to_shift - divisor) << 32) / divisor + 1);
  }

  RT_HD std::uint32_t divide(std::uint32_t n) const {
#if defined(__CUDA_ARCH__)
    const std::uint32_t high = __umulhi(multiplier, n);
#else
    const auto high = static_cast<std::uint32_t>((std::uint64_t{multiplier} * n) >> 32);
#endif
    // In 64 bits: high + n can pass 2^32.
    return static_cast<std::uint32_t>((std::uint64_t{high} + n) >> shift);
  }
  RT_HD std::uint32_t remainder(std::uint32_t n) const {
    return n - divide(n) * divisor;
  }
};

// The channel of flat element i of an [outer, channels, inner] tensor,
// (i / inner) % channels: without a division where the element count fits 32
// bits, and as written where it does not.
struct ChannelOf32 {
  FastDivide channels, inner;
  ChannelOf32(std::uint32_t c, std::uint32_t in) : channels(c), inner(in) {}
  RT_HD std::uint32_t operator()(std::uint32_t i) const {
    return channels.remainder(inner.divide(i));
  }
};

struct ChannelOfWide {
  std::size_t channels, inner;
  RT_HD std::size_t operator()(std::size_t i) const { return (i / inner) % channels; }
};

}  // namespace ringtrain::kernels
