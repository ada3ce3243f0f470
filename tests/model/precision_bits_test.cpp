// The 16-bit encodings the GPU's tensor-core products read
// (kernels/precision.cuh): a value on the bf16/fp16 grid converts exactly and
// back, so a 16-bit copy of a rounded fp32 buffer carries the same numbers;
// an off-grid value rounds as round_to_precision_grid rounds.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "kernels/precision.cuh"

namespace ringtrain {
namespace {

using kernels::from_precision_bits;
using kernels::round_to_precision_grid;
using kernels::to_precision_bits;

// Values across the range: signs, magnitudes from fp16's subnormals to bf16's
// large numbers, odd mantissas.
std::vector<float> sample_values() {
  std::vector<float> v = {0.0f,
                          -0.0f,
                          1.0f,
                          -1.0f,
                          0.1f,
                          1.0f / 3.0f,
                          65504.0f,
                          65519.0f,
                          65520.0f,
                          1e-8f,
                          5.9604644775390625e-8f,
                          3e-5f,
                          1e30f,
                          -2.5e-38f,
                          std::numeric_limits<float>::infinity(),
                          -std::numeric_limits<float>::infinity()};
  std::uint32_t h = 12345;
  for (int i = 0; i < 2000; ++i) {
    h = h * 1664525u + 1013904223u;
    const float mant = 1.0f + static_cast<float>(h >> 8) / 16777216.0f;
    const int exp = static_cast<int>(h % 61) - 30;
    v.push_back(((h >> 7) & 1u ? -1.0f : 1.0f) * std::ldexp(mant, exp));
  }
  return v;
}

}  // namespace

TEST_CASE("precision bits: on-grid values convert to 16 bits exactly and back",
          "[precision][tensor_core]") {
  for (const DType p : {DType::bf16, DType::f16}) {
    INFO("precision " << dtype_name(p));
    std::size_t checked = 0;
    for (const float x : sample_values()) {
      const float on_grid = round_to_precision_grid(x, p);
      const std::uint16_t bits = to_precision_bits(on_grid, p);
      // Bit for bit (the sign of zero included).
      const float back = from_precision_bits(bits, p);
      CHECK(kernels::float_bits(back) == kernels::float_bits(on_grid));
      CHECK(to_precision_bits(back, p) == bits);
      ++checked;
    }
    CHECK(checked > 2000);
  }
  // A few encodings by value: 1.0 and fp16's largest finite, smallest subnormal.
  CHECK(to_precision_bits(1.0f, DType::bf16) == 0x3f80u);
  CHECK(to_precision_bits(1.0f, DType::f16) == 0x3c00u);
  CHECK(to_precision_bits(65504.0f, DType::f16) == 0x7bffu);
  CHECK(to_precision_bits(5.9604644775390625e-8f, DType::f16) == 0x0001u);
}

TEST_CASE("precision bits: off-grid values round as the rounding kernels round",
          "[precision][tensor_core]") {
  for (const DType p : {DType::bf16, DType::f16}) {
    INFO("precision " << dtype_name(p));
    std::size_t off_grid = 0;
    for (const float x : sample_values()) {
      const float converted = from_precision_bits(to_precision_bits(x, p), p);
      CHECK(kernels::float_bits(converted) == kernels::float_bits(round_to_precision_grid(x, p)));
      off_grid += converted != x;
    }
    CHECK(off_grid > 1000);  // most samples were off the grid: rounding was exercised
  }
  // Ties to even: 1 + 2^-8 lies halfway between bf16's 1 and 1 + 2^-7.
  CHECK(from_precision_bits(to_precision_bits(1.0f + 0x1p-8f, DType::bf16), DType::bf16) == 1.0f);
  // fp16 overflows to Inf from 65520 on; NaN stays NaN.
  CHECK(std::isinf(from_precision_bits(to_precision_bits(65520.0f, DType::f16), DType::f16)));
  CHECK(std::isnan(from_precision_bits(
      to_precision_bits(std::numeric_limits<float>::quiet_NaN(), DType::f16), DType::f16)));
}

}  // namespace ringtrain
