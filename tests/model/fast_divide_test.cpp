// kernels/fast_divide.cuh: the multiply-high division that the GPU's
// elementwise kernels use to find an element's channel equals n / d for every
// divisor shape they meet and for the edges of the 32-bit range. The same
// functions run here as on the GPU (RT_HD), apart from __umulhi, which is the
// high half of the same 64-bit product.
#include <catch2/catch.hpp>

#include <cstdint>
#include <random>
#include <vector>

#include "kernels/fast_divide.cuh"

using ringtrain::kernels::ChannelOf32;
using ringtrain::kernels::ChannelOfWide;
using ringtrain::kernels::FastDivide;

namespace {

std::vector<std::uint32_t> divisors() {
  std::vector<std::uint32_t> d;
  for (std::uint32_t v = 1; v <= 4100; ++v) d.push_back(v);  // channel counts, 7x7 ... 64x64
  for (std::uint32_t v : {12544u, 50176u, 200704u, 802816u, 3211264u})  // H*W, C*H*W of ResNet
    d.push_back(v);
  for (int k = 12; k < 32; ++k) {
    const std::uint32_t p = std::uint32_t{1} << k;
    for (std::uint32_t v : {p - 1, p, p + 1}) d.push_back(v);
  }
  d.push_back(UINT32_MAX);
  return d;
}

}  // namespace

TEST_CASE("FastDivide equals integer division", "[kernels]") {
  std::mt19937 rng(7);
  std::uniform_int_distribution<std::uint32_t> any;
  for (const std::uint32_t d : divisors()) {
    const FastDivide f(d);
    CAPTURE(d, f.multiplier, f.shift);
    std::vector<std::uint32_t> ns = {0, 1, d - 1, d, UINT32_MAX, UINT32_MAX - 1, UINT32_MAX - d};
    // around multiples of d near the top of the range, where rounding would show
    const std::uint32_t top = UINT32_MAX / d * d;
    for (std::uint32_t back : {0u, 1u}) ns.push_back(top - back);
    if (top <= UINT32_MAX - d) ns.push_back(top + d - 1);
    for (int k = 0; k < 200; ++k) ns.push_back(any(rng));
    std::size_t wrong = 0;
    for (const std::uint32_t n : ns) {
      wrong += f.divide(n) != n / d;
      wrong += f.remainder(n) != n % d;
    }
    REQUIRE(wrong == 0);
  }
}

TEST_CASE("FastDivide over every 32-bit numerator for a few divisors", "[kernels][slow]") {
  // The whole range for divisors whose magic multiplier is largest relative to
  // 2^32 (just above a power of two) and an odd channel count.
  for (const std::uint32_t d : {3u, 7u, 49u, 1025u, 65537u}) {
    const FastDivide f(d);
    CAPTURE(d);
    std::uint64_t wrong = 0;
    for (std::uint64_t n = 0; n <= UINT32_MAX; n += 97)  // a stride prime to every d here
      wrong += f.divide(static_cast<std::uint32_t>(n)) != static_cast<std::uint32_t>(n) / d;
    REQUIRE(wrong == 0);
  }
}

TEST_CASE("ChannelOf32 and ChannelOfWide agree with (i / inner) % channels", "[kernels]") {
  for (const auto& [channels, inner] : std::vector<std::pair<std::uint32_t, std::uint32_t>>{
           {3, 1}, {64, 12544}, {2048, 49}, {1000, 1}, {7, 5}}) {
    const ChannelOf32 fast(channels, inner);
    const ChannelOfWide wide{channels, inner};
    std::size_t wrong = 0;
    for (std::uint32_t i = 0; i < 200000; i += 13) {
      const std::uint32_t expect = (i / inner) % channels;
      wrong += fast(i) != expect;
      wrong += wide(i) != expect;
    }
    CHECK(wrong == 0);
  }
}
