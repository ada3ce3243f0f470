// One row per warp: the shape of the row kernels whose rows are too wide for
// one thread (a LayerNorm row, a row of attention scores, a language model's
// logits). A row's sums are lane-strided, then combined by a butterfly of
// shuffles: a fixed order, so results repeat bit for bit.
#pragma once

#include <math.h>

#include <cstddef>

namespace ringtrain::kernels {

constexpr unsigned kWarp = 32;
constexpr unsigned kRowThreads = 256;  // 8 rows (warps) per block

__device__ __forceinline__ float warp_sum(float v) {
  for (unsigned o = kWarp / 2; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ __forceinline__ float warp_max(float v) {
  for (unsigned o = kWarp / 2; o > 0; o /= 2) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// The row a thread's warp owns, and the thread's lane in it.
__device__ __forceinline__ std::size_t warp_row() {
  return (blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x) / kWarp;
}
__device__ __forceinline__ unsigned warp_lane() {
  return threadIdx.x % kWarp;
}

// Blocks of kRowThreads for one warp per row.
inline unsigned warp_row_blocks(std::size_t rows) {
  return static_cast<unsigned>((rows * kWarp + kRowThreads - 1) / kRowThreads);
}

}  // namespace ringtrain::kernels
