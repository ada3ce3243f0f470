// Where a training step's transient buffers sit in one allocation. Each block
// (an activation, an activation gradient, a contribution's scratch) is live
// over [birth, death] on the step's timeline, and two blocks share bytes only
// where their lives do not meet: an early layer's large gradient lands in the
// memory of later layers' activations, dead by then, as a framework that frees
// tensors after their last use would hold at its peak, but planned once, so
// the step allocates nothing and a captured CUDA graph sees fixed addresses.
#pragma once

#include <cstddef>
#include <vector>

namespace ringtrain {

struct LiveBlock {
  std::size_t bytes = 0;
  std::size_t birth = 0, death = 0;  // inclusive; birth <= death
};

struct BlockLayout {
  std::vector<std::size_t> offsets;  // per block, multiples of the alignment
  std::size_t bytes = 0;             // the allocation's size
};

// Largest blocks first, each at the lowest aligned offset that no placed
// block live at the same time covers (deterministic: ties by birth, then by
// index). Error if a block dies before it is born.
BlockLayout pack_live_blocks(const std::vector<LiveBlock>& blocks, std::size_t alignment);

}  // namespace ringtrain
