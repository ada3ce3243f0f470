// Launch geometry of the optimizer kernels (sgd, adamw, scale): grid-stride
// loops with a capped grid, so any n, even above 2^31, is one launch.
#pragma once

#include <algorithm>
#include <cstddef>

namespace ringtrain::kernels {

inline constexpr unsigned kOptimThreads = 256;
inline constexpr std::size_t kOptimMaxBlocks = 4096;

inline unsigned optim_blocks(std::size_t n) {
  return static_cast<unsigned>(
      std::clamp<std::size_t>((n + kOptimThreads - 1) / kOptimThreads, 1, kOptimMaxBlocks));
}

}  // namespace ringtrain::kernels
