// The element arithmetic of the collectives (kernels/reduce.cuh), which the CPU
// backends use and GPU kernels can share: f16/bf16 rounding and the loops of
// comm/elementwise_reduce.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "comm/elementwise_reduce.h"
#include "kernels/reduce.cuh"

using namespace ringtrain;
using namespace ringtrain::kernels;

TEST_CASE("f16 round trip is exact for every finite half") {
  for (std::uint32_t h = 0; h < 0x10000u; ++h) {
    const auto bits = static_cast<std::uint16_t>(h);
    if ((bits & 0x7c00u) == 0x7c00u && (bits & 0x3ffu)) continue;  // NaN payloads
    REQUIRE(float_to_half(half_to_float(bits)) == bits);
  }
}

TEST_CASE("f16 rounds to nearest even, saturates to inf, keeps subnormals") {
  REQUIRE(half_to_float(float_to_half(1.0f)) == 1.0f);
  REQUIRE(float_to_half(65504.0f) == 0x7bffu);
  REQUIRE(float_to_half(65520.0f) == 0x7c00u);                         // halfway above max: inf
  REQUIRE(float_to_half(65519.0f) == 0x7bffu);
  REQUIRE(float_to_half(1.0f + 1.0f / 2048.0f) == 0x3c00u);            // tie to even (down)
  REQUIRE(float_to_half(1.0f + 3.0f / 2048.0f) == 0x3c02u);            // tie to even (up)
  REQUIRE(float_to_half(5.9604644775390625e-8f) == 0x0001u);           // smallest subnormal
  REQUIRE(float_to_half(2.98023223876953125e-8f) == 0x0000u);          // half of it: tie to 0
  REQUIRE(float_to_half(-0.0f) == 0x8000u);
  REQUIRE(std::isnan(half_to_float(float_to_half(std::numeric_limits<float>::quiet_NaN()))));
}

TEST_CASE("bf16 rounds to nearest even") {
  REQUIRE(bf16_to_float(float_to_bf16(1.0f)) == 1.0f);
  REQUIRE(float_to_bf16(bits_float(0x3f808000u)) == 0x3f80u);  // tie, even stays
  REQUIRE(float_to_bf16(bits_float(0x3f818000u)) == 0x3f82u);  // tie, odd rounds up
  REQUIRE(float_to_bf16(bits_float(0x3f808001u)) == 0x3f81u);
  REQUIRE(std::isnan(bf16_to_float(float_to_bf16(std::numeric_limits<float>::quiet_NaN()))));
}

TEST_CASE("reduce_to_many accumulates f16 in f32 and writes every destination") {
  // 2048 + 1 + 1 in f16 pairwise would stay 2048 (ulp 2); in f32 it is 2050.
  const std::size_t n = 5000;
  std::vector<std::uint16_t> a(n, float_to_half(2048.0f)), b(n, float_to_half(1.0f)), c(n, float_to_half(1.0f));
  std::vector<std::uint16_t> out1(n), out2(n);
  const void* srcs[3] = {a.data(), b.data(), c.data()};
  void* dsts[2] = {out1.data(), out2.data()};
  comm_detail::reduce_to_many(DType::f16, ReduceOp::sum, srcs, 3, dsts, 2, n, 3);
  for (std::size_t i = 0; i < n; ++i) {
    REQUIRE(half_to_float(out1[i]) == 2050.0f);
    REQUIRE(out2[i] == out1[i]);
  }
}

TEST_CASE("reduce_to_many in place: a destination aliasing a source") {
  const std::size_t n = 4099;
  std::vector<std::int64_t> a(n), b(n);
  for (std::size_t i = 0; i < n; ++i) {
    a[i] = static_cast<std::int64_t>(i) - 2000;
    b[i] = 3 * static_cast<std::int64_t>(i % 17);
  }
  const std::vector<std::int64_t> a0 = a, b0 = b;
  const void* srcs[2] = {a.data(), b.data()};
  void* dsts[2] = {a.data(), b.data()};
  comm_detail::reduce_to_many(DType::i64, ReduceOp::avg, srcs, 2, dsts, 2, n, 2);
  for (std::size_t i = 0; i < n; ++i) {
    REQUIRE(a[i] == (a0[i] + b0[i]) / 2);
    REQUIRE(b[i] == a[i]);
  }
}
