// Element arithmetic of the collectives, shared by the CPU backends (shm, ring,
// mpi) and any CUDA kernel: f16/bf16 <-> f32 conversion (round to nearest
// even, as the hardware does) and the reduction operators. 16-bit types are
// accumulated in f32 and rounded once.
#pragma once

#include <cstdint>
#include <cstring>

#include "kernels/host_device.cuh"

namespace ringtrain::kernels {

RT_HD std::uint32_t float_bits(float f) {
  std::uint32_t u;
  memcpy(&u, &f, sizeof(u));
  return u;
}
RT_HD float bits_float(std::uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof(f));
  return f;
}

// IEEE binary16.
RT_HD float half_to_float(std::uint16_t h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  const std::uint32_t exp = (h >> 10) & 0x1fu;
  const std::uint32_t mant = h & 0x3ffu;
  if (exp == 0x1f) return bits_float(sign | 0x7f800000u | (mant << 13));
  if (exp == 0) {
    // Zero or subnormal: mant * 2^-24, exact in f32.
    const float v = static_cast<float>(mant) * 5.9604644775390625e-8f;
    return sign ? -v : v;
  }
  return bits_float(sign | ((exp + 112u) << 23) | (mant << 13));
}

RT_HD std::uint16_t float_to_half(float f) {
  const std::uint32_t x = float_bits(f);
  const std::uint32_t sign = (x >> 16) & 0x8000u;
  const std::uint32_t ax = x & 0x7fffffffu;
  if (ax >= 0x7f800000u)  // inf, or a quiet NaN
    return static_cast<std::uint16_t>(sign | 0x7c00u | (ax > 0x7f800000u ? 0x200u : 0u));
  if (ax >= 0x477ff000u) return static_cast<std::uint16_t>(sign | 0x7c00u);  // >= 65520: inf
  if (ax < 0x38800000u) {
    // Below the smallest normal (2^-14): a subnormal in units of 2^-24.
    const int e = static_cast<int>(ax >> 23);
    const int shift = 126 - e;
    if (shift > 24) return static_cast<std::uint16_t>(sign);
    const std::uint32_t m = (ax & 0x7fffffu) | 0x800000u;
    std::uint32_t q = m >> shift;
    const std::uint32_t rem = m & ((1u << shift) - 1u);
    const std::uint32_t half = 1u << (shift - 1);
    if (rem > half || (rem == half && (q & 1u))) ++q;
    return static_cast<std::uint16_t>(sign | q);
  }
  std::uint32_t q = (ax >> 13) - (112u << 10);
  const std::uint32_t rem = ax & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (q & 1u))) ++q;
  return static_cast<std::uint16_t>(sign | q);
}

// bfloat16: the top half of an f32.
RT_HD float bf16_to_float(std::uint16_t b) {
  return bits_float(static_cast<std::uint32_t>(b) << 16);
}

RT_HD std::uint16_t float_to_bf16(float f) {
  const std::uint32_t x = float_bits(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((x >> 16) | 0x40u);  // NaN
  const std::uint32_t rounded = x + 0x7fffu + ((x >> 16) & 1u);
  return static_cast<std::uint16_t>(rounded >> 16);
}

// The binary operators. avg is a sum followed by a division by the rank count.
struct SumOp {
  template <typename T>
  RT_HD T operator()(T a, T b) const {
    return a + b;
  }
};
struct MaxOp {
  template <typename T>
  RT_HD T operator()(T a, T b) const {
    return a < b ? b : a;
  }
};
struct MinOp {
  template <typename T>
  RT_HD T operator()(T a, T b) const {
    return b < a ? b : a;
  }
};

}  // namespace ringtrain::kernels
