// Eight consecutive values of a 16-bit or fp32 storage buffer (kernels/storage.cuh)
// in one 16-byte access (two for fp32), for .cu files: the row kernels that take 8
// channels of a row at a time, where 8 divides the channels and the buffer is 16-byte
// aligned, so that every group of 8 starts on 16 bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "kernels/storage.cuh"

namespace ringtrain::kernels {

constexpr unsigned kVector8 = 8;

template <typename T>
bool vector8_aligned(const T* p) {
  return reinterpret_cast<std::uintptr_t>(p) % 16 == 0;
}

// Values first ... first + 7 of p (first a multiple of 8) as their stored
// bits, fetched now and widened later (widen8): a kernel that keeps several
// rows' loads in flight holds the 16 bytes a row takes (32 for fp32), not
// its eight widened floats.
template <typename T>
struct Raw8 {
  uint4 q[sizeof(T) / 2];
};
template <typename T>
__device__ __forceinline__ Raw8<T> fetch8(const T* p, std::size_t first) {
  static_assert(sizeof(T) == 2 || sizeof(T) == 4, "a 16-bit or fp32 storage type");
  Raw8<T> raw;
  const auto* from = reinterpret_cast<const uint4*>(p + first);
#pragma unroll
  for (std::size_t q = 0; q < sizeof(T) / 2; ++q) raw.q[q] = from[q];
  return raw;
}
template <typename T>
__device__ __forceinline__ void widen8(const Raw8<T>& raw, float (&out)[kVector8]) {
  T w[kVector8];
  memcpy(w, raw.q, sizeof w);
#pragma unroll
  for (unsigned k = 0; k < kVector8; ++k) out[k] = load(w, k);
}

// Values first ... first + 7 of p, widened.
template <typename T>
__device__ __forceinline__ void load8(const T* p, std::size_t first, float (&out)[kVector8]) {
  widen8(fetch8(p, first), out);
}

// Values first ... first + 7 of p narrowed from in, as store<T> narrows each.
template <typename T>
__device__ __forceinline__ void store8(T* p, std::size_t first, const float (&in)[kVector8]) {
  static_assert(sizeof(T) == 2 || sizeof(T) == 4, "a 16-bit or fp32 storage type");
  T w[kVector8];
#pragma unroll
  for (unsigned k = 0; k < kVector8; ++k) store(w, k, in[k]);
  uint4 raw[sizeof(T) / 2];
  memcpy(raw, w, sizeof w);
  auto* to = reinterpret_cast<uint4*>(p + first);
#pragma unroll
  for (std::size_t q = 0; q < sizeof(T) / 2; ++q) to[q] = raw[q];
}

}  // namespace ringtrain::kernels
