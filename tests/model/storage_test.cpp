// load<T>/store<T> (kernels/storage.cuh): what a 16-bit activation buffer
// holds after a store, and what a kernel reads back. Ties round to even, NaN
// stays NaN (and quiet), infinities and signed zeros stay, subnormals of each
// format are exact or round to the nearest, fp16 overflows to Inf at 65520 and
// not below, bf16 keeps fp32's range. A store of an on-grid value and a load
// are exact, so 16-bit storage keeps the numbers of fp32 buffers on the grid.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>
#include <utility>
#include <vector>

#include "kernels/precision.cuh"
#include "kernels/storage.cuh"

namespace ringtrain {
namespace {

using kernels::bf16_word;
using kernels::f16_word;
using kernels::load;
using kernels::store;

template <typename T>
float round_trip(float v) {
  T word{};
  store(&word, 0, v);
  return load(&word, 0);
}

template <typename T>
std::uint16_t bits_of(float v) {
  T word{};
  store(&word, 0, v);
  return word.bits;
}

std::uint32_t float_bits(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, sizeof(u));
  return u;
}

const float kInf = std::numeric_limits<float>::infinity();

}  // namespace

TEST_CASE("storage: bf16 stores round to nearest even", "[storage]") {
  // 1 + 2^-8 lies halfway between 1 and 1 + 2^-7: the even one (1) wins.
  CHECK(round_trip<bf16_word>(1.0f + 0x1p-8f) == 1.0f);
  // 1 + 3 * 2^-8 is halfway between 1 + 2^-7 and 1 + 2^-6: the even one.
  CHECK(round_trip<bf16_word>(1.0f + 3 * 0x1p-8f) == 1.0f + 0x1p-6f);
  // Just above the tie rounds up.
  CHECK(round_trip<bf16_word>(1.0f + 0x1p-8f + 0x1p-20f) == 1.0f + 0x1p-7f);
  CHECK(bits_of<bf16_word>(1.0f) == 0x3f80u);
  CHECK(bits_of<bf16_word>(-2.0f) == 0xc000u);
}

TEST_CASE("storage: fp16 stores round to nearest even and overflow at 65520", "[storage]") {
  CHECK(round_trip<f16_word>(1.0f + 0x1p-11f) == 1.0f);                // tie: even
  CHECK(round_trip<f16_word>(1.0f + 3 * 0x1p-11f) == 1.0f + 0x1p-9f);  // tie: even
  CHECK(round_trip<f16_word>(65504.0f) == 65504.0f);                   // the largest finite
  CHECK(round_trip<f16_word>(65519.0f) == 65504.0f);                   // below the tie: down
  CHECK(std::isinf(round_trip<f16_word>(65520.0f)));                   // the tie: to Inf
  CHECK(std::isinf(round_trip<f16_word>(-1e6f)));
  CHECK(round_trip<f16_word>(-1e6f) < 0);
  CHECK(bits_of<f16_word>(1.0f) == 0x3c00u);
  CHECK(bits_of<f16_word>(65504.0f) == 0x7bffu);
}

TEST_CASE("storage: NaN, infinities and signed zeros", "[storage]") {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float signalling = std::numeric_limits<float>::signaling_NaN();
  for (const float v : {nan, -nan, signalling}) {
    CHECK(std::isnan(round_trip<bf16_word>(v)));
    CHECK(std::isnan(round_trip<f16_word>(v)));
    // quiet after a store, whatever it was
    CHECK((float_bits(round_trip<bf16_word>(v)) & 0x00400000u) != 0);
    CHECK((float_bits(round_trip<f16_word>(v)) & 0x00400000u) != 0);
  }
  for (const float v : {kInf, -kInf}) {
    CHECK(round_trip<bf16_word>(v) == v);
    CHECK(round_trip<f16_word>(v) == v);
  }
  CHECK(std::signbit(round_trip<bf16_word>(-0.0f)));
  CHECK(std::signbit(round_trip<f16_word>(-0.0f)));
  CHECK(round_trip<bf16_word>(-0.0f) == 0.0f);
  // bf16 keeps fp32's range: no overflow where fp16 has one
  CHECK(round_trip<bf16_word>(3e38f) == Approx(3e38f).epsilon(0.01));
  CHECK(std::isinf(round_trip<bf16_word>(std::numeric_limits<float>::max())));  // rounds up
}

TEST_CASE("storage: subnormals", "[storage]") {
  // fp16's smallest subnormal, 2^-24, and its multiples are exact.
  CHECK(round_trip<f16_word>(0x1p-24f) == 0x1p-24f);
  CHECK(bits_of<f16_word>(0x1p-24f) == 0x0001u);
  CHECK(round_trip<f16_word>(3 * 0x1p-24f) == 3 * 0x1p-24f);
  // Half of it is a tie between 0 and 2^-24: even (0).
  CHECK(round_trip<f16_word>(0x1p-25f) == 0.0f);
  // Above half rounds up to the smallest subnormal.
  CHECK(round_trip<f16_word>(0x1p-25f + 0x1p-30f) == 0x1p-24f);
  // A tie between two subnormals, 2.5 * 2^-24: even (2 * 2^-24).
  CHECK(round_trip<f16_word>(2.5f * 0x1p-24f) == 2 * 0x1p-24f);
  // The largest fp16 subnormal and the smallest normal.
  CHECK(round_trip<f16_word>(1023 * 0x1p-24f) == 1023 * 0x1p-24f);
  CHECK(round_trip<f16_word>(0x1p-14f) == 0x1p-14f);
  // bf16 shares fp32's exponent range but keeps 7 mantissa bits: its
  // smallest subnormal is 2^-133; fp32's 2^-149 rounds to zero.
  CHECK(round_trip<bf16_word>(0x1p-133f) == 0x1p-133f);
  CHECK(round_trip<bf16_word>(0x1p-130f) == 0x1p-130f);
  CHECK(round_trip<bf16_word>(std::numeric_limits<float>::denorm_min()) == 0.0f);
}

TEST_CASE("storage: load(store(x)) is the 16-bit grid rounding, and exact on the grid",
          "[storage]") {
  std::uint32_t h = 99;
  for (int i = 0; i < 20000; ++i) {
    h = h * 1664525u + 1013904223u;
    const float mant = 1.0f + static_cast<float>(h >> 8) / 16777216.0f;
    const int exp = static_cast<int>(h % 71) - 35;
    const float x = ((h >> 7) & 1u ? -1.0f : 1.0f) * std::ldexp(mant, exp);
    const float bf = round_trip<bf16_word>(x), hf = round_trip<f16_word>(x);
    REQUIRE(float_bits(bf) == float_bits(kernels::round_to_precision_grid(x, DType::bf16)));
    REQUIRE(float_bits(hf) == float_bits(kernels::round_to_precision_grid(x, DType::f16)));
    REQUIRE(float_bits(round_trip<bf16_word>(bf)) == float_bits(bf));
    REQUIRE(float_bits(round_trip<f16_word>(hf)) == float_bits(hf));
    REQUIRE(round_trip<float>(x) == x);
  }
}

TEST_CASE("storage: with_storage picks the element type of a dtype", "[storage]") {
  const auto size_of = [](DType d) {
    return kernels::with_storage(d, [](auto word) { return sizeof(word); });
  };
  CHECK(size_of(DType::f32) == 4);
  CHECK(size_of(DType::bf16) == 2);
  CHECK(size_of(DType::f16) == 2);
  CHECK(size_of(DType::bf16) == dtype_size(DType::bf16));
  static_assert(std::is_same_v<kernels::storage_t<DType::bf16>, bf16_word>);
  static_assert(std::is_same_v<kernels::storage_t<DType::f16>, f16_word>);
  static_assert(std::is_same_v<kernels::storage_t<DType::f32>, float>);
  // A buffer of 16-bit words stored and loaded element by element.
  std::vector<bf16_word> buffer(5);
  for (std::size_t i = 0; i < buffer.size(); ++i)
    store(buffer.data(), i, 0.5f * static_cast<float>(i));
  for (std::size_t i = 0; i < buffer.size(); ++i)
    CHECK(load(buffer.data(), i) == 0.5f * static_cast<float>(i));
}

TEST_CASE("storage: with_storage_pair dispatches a source and a destination type", "[storage]") {
  const auto pair = [](DType t, DType d) {
    return kernels::with_storage_pair(t, d, [](auto a, auto b) {
      return std::pair<std::size_t, bool>(
          10 * sizeof(a) + sizeof(b),
          std::is_same_v<decltype(b), float> || !std::is_same_v<decltype(a), decltype(b)>);
    });
  };
  CHECK(pair(DType::bf16, DType::f32) == std::pair<std::size_t, bool>(24, true));
  CHECK(pair(DType::f16, DType::f16) == std::pair<std::size_t, bool>(22, false));
  CHECK(pair(DType::f32, DType::bf16) == std::pair<std::size_t, bool>(42, true));
  // A bf16 source narrowed into fp16 words through fp32, element by element.
  std::vector<bf16_word> in(3);
  std::vector<f16_word> out(3);
  for (std::size_t i = 0; i < in.size(); ++i) store(in.data(), i, 0.25f * static_cast<float>(i));
  kernels::with_storage_pair(DType::bf16, DType::f16, [&](auto a, auto b) {
    using A = decltype(a);
    using B = decltype(b);
    if constexpr (std::is_same_v<A, bf16_word> && std::is_same_v<B, f16_word>)
      for (std::size_t i = 0; i < in.size(); ++i) store(out.data(), i, load(in.data(), i));
  });
  for (std::size_t i = 0; i < out.size(); ++i)
    CHECK(load(out.data(), i) == 0.25f * static_cast<float>(i));
}

}  // namespace ringtrain
