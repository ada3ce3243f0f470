// Host-side launcher for kernels/grad_norm.cu: sum of squares of an f32 buffer,
// accumulated in double. Deterministic: a fixed grid per n, block partials
// written to scratch and summed by one block in a fixed order (no atomics), so
// ranks holding the same all-reduced gradients get bit-identical norms.
#pragma once

#include <cstddef>

namespace ringtrain::kernels {

inline constexpr std::size_t kSumSquaresMaxBlocks = 1024;
// Device doubles that sum_squares_f32_cuda needs as scratch.
inline constexpr std::size_t kSumSquaresScratchCount = kSumSquaresMaxBlocks + 1;

// Writes sum(x[i]^2) to scratch[0] (device memory), asynchronously on `stream`.
void sum_squares_f32_cuda(const float* x, std::size_t n, double* scratch, void* stream);

}  // namespace ringtrain::kernels
