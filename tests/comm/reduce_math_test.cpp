// The element arithmetic of the collectives (kernels/reduce.cuh), which the CPU
// backends use and GPU kernels can share: f16/bf16 rounding and the loops of
// comm/elementwise_reduce.
#include <catch2/catch.hpp>

#include <algorithm>
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
  REQUIRE(float_to_half(65520.0f) == 0x7c00u);  // halfway above max: inf
  REQUIRE(float_to_half(65519.0f) == 0x7bffu);
  REQUIRE(float_to_half(1.0f + 1.0f / 2048.0f) == 0x3c00u);    // tie to even (down)
  REQUIRE(float_to_half(1.0f + 3.0f / 2048.0f) == 0x3c02u);    // tie to even (up)
  REQUIRE(float_to_half(5.9604644775390625e-8f) == 0x0001u);   // smallest subnormal
  REQUIRE(float_to_half(2.98023223876953125e-8f) == 0x0000u);  // half of it: tie to 0
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
  std::vector<std::uint16_t> a(n, float_to_half(2048.0f)), b(n, float_to_half(1.0f)),
      c(n, float_to_half(1.0f));
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

namespace {

// Reference: the scalar formula, element by element.
template <typename T>
T reference(ReduceOp op, const std::vector<std::vector<T>>& in, std::size_t i) {
  T v = in[0][i];
  for (std::size_t k = 1; k < in.size(); ++k) {
    const T x = in[k][i];
    v = op == ReduceOp::max   ? (v < x ? x : v)
        : op == ReduceOp::min ? (x < v ? x : v)
                              : static_cast<T>(v + x);
  }
  if (op == ReduceOp::avg) v = static_cast<T>(v / static_cast<T>(in.size()));
  return v;
}

template <typename T>
void check_native(DType dtype) {
  for (int nsrc : {1, 2, 3, 4})
    for (ReduceOp op : {ReduceOp::sum, ReduceOp::avg, ReduceOp::max, ReduceOp::min})
      // Vector bodies and every tail length; offsets break 64-byte alignment.
      for (std::size_t n : {0, 1, 15, 16, 17, 63, 64, 65, 1000, 4099})
        for (std::size_t shift : {0, 3}) {
          std::vector<std::vector<T>> in(static_cast<std::size_t>(nsrc), std::vector<T>(n + shift));
          for (int k = 0; k < nsrc; ++k)
            for (std::size_t i = 0; i < n + shift; ++i)
              in[static_cast<std::size_t>(k)][i] =
                  static_cast<T>((static_cast<int>(i * 7 + 13 * k) % 41) - 20);
          std::vector<std::vector<T>> out(static_cast<std::size_t>(nsrc),
                                          std::vector<T>(n + shift + 1, T(99)));
          std::vector<const void*> srcs;
          std::vector<void*> dsts;
          for (int k = 0; k < nsrc; ++k) {
            srcs.push_back(in[static_cast<std::size_t>(k)].data() + shift);
            dsts.push_back(out[static_cast<std::size_t>(k)].data() + shift);
          }
          comm_detail::reduce_to_many(dtype, op, srcs.data(), nsrc, dsts.data(), nsrc, n, nsrc);
          for (std::size_t i = 0; i < n; ++i) {
            INFO(dtype_name(dtype)
                 << " " << reduce_op_name(op) << " nsrc " << nsrc << " n " << n << " i " << i);
            std::vector<std::vector<T>> at = in;
            for (auto& v : at) v.erase(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(shift));
            const T want = reference(op, at, i);
            for (int k = 0; k < nsrc; ++k)
              REQUIRE(out[static_cast<std::size_t>(k)][shift + i] == want);
          }
          for (int k = 0; k < nsrc; ++k)
            REQUIRE(out[static_cast<std::size_t>(k)][shift + n] == T(99));
        }
}

}  // namespace

TEST_CASE("reduce_to_many on native types equals the scalar formula for every shape") {
  check_native<float>(DType::f32);
  check_native<double>(DType::f64);
  check_native<std::int32_t>(DType::i32);
  check_native<std::int64_t>(DType::i64);
}

TEST_CASE("reduce_to_many out of place, large: every store policy gives the same result") {
  // 3M floats to each of two destinations: past the sizes where results meant
  // for other cores, then all results, bypass the cache. The +1 offset forces
  // the ordinary-store fallback; the hints select cached, mixed and streamed.
  const std::size_t n = (std::size_t{3} << 20) + 5;
  std::vector<float> a(n + 1), b(n + 1), o1(n + 1), o2(n + 1);
  for (std::size_t i = 0; i < n + 1; ++i) {
    a[i] = static_cast<float>(i % 1000);
    b[i] = 0.5f * static_cast<float>(i % 7);
  }
  const comm_detail::StoreHint hints[] = {
      {}, {.may_stream = true, .local_dst = 1}, {.may_stream = false, .local_dst = -1}};
  for (const auto& hint : hints)
    for (std::size_t shift : {0, 1}) {
      std::fill(o1.begin(), o1.end(), -1.0f);
      std::fill(o2.begin(), o2.end(), -1.0f);
      const void* srcs[2] = {a.data() + shift, b.data() + shift};
      void* dsts[2] = {o1.data() + shift, o2.data() + shift};
      comm_detail::reduce_to_many(DType::f32, ReduceOp::sum, srcs, 2, dsts, 2, n, 2, hint);
      for (std::size_t i = 0; i < n; ++i) {
        const float want = a[shift + i] + b[shift + i];
        if (o1[shift + i] != want || o2[shift + i] != want)
          FAIL("local_dst " << hint.local_dst << " shift " << shift << " i " << i);
      }
    }
}
