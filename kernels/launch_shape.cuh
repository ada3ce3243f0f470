// Grid sizing for the grid-stride elementwise kernels in kernels/*.cu.
#pragma once

#include <algorithm>
#include <cstddef>

namespace ringtrain::kernels {

constexpr unsigned kElementwiseThreads = 256;

inline unsigned elementwise_blocks(std::size_t n) {
  return static_cast<unsigned>(std::max<std::size_t>(
      1, std::min<std::size_t>((n + kElementwiseThreads - 1) / kElementwiseThreads, 8192)));
}

}  // namespace ringtrain::kernels
