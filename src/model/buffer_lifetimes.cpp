// pack_live_blocks (buffer_lifetimes.h).
#include "model/buffer_lifetimes.h"

#include <algorithm>
#include <numeric>
#include <utility>

#include "ringtrain/core/check.h"

namespace ringtrain {

BlockLayout pack_live_blocks(const std::vector<LiveBlock>& blocks, std::size_t alignment) {
  RT_CHECK(alignment > 0, "pack_live_blocks: alignment 0");
  const auto align = [&](std::size_t v) { return (v + alignment - 1) / alignment * alignment; };
  const std::size_t n = blocks.size();
  for (std::size_t b = 0; b < n; ++b)
    RT_CHECK(blocks[b].birth <= blocks[b].death,
             "pack_live_blocks: block {} dies ({}) before it is born ({})", b, blocks[b].death,
             blocks[b].birth);
  std::vector<std::size_t> order(n);
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    if (blocks[a].bytes != blocks[b].bytes) return blocks[a].bytes > blocks[b].bytes;
    if (blocks[a].birth != blocks[b].birth) return blocks[a].birth < blocks[b].birth;
    return a < b;
  });
  BlockLayout layout;
  layout.offsets.assign(n, 0);
  std::vector<std::size_t> placed;
  std::vector<std::pair<std::size_t, std::size_t>> taken;  // [begin, end) of the live ones
  for (const std::size_t b : order) {
    const LiveBlock& block = blocks[b];
    const std::size_t size = align(block.bytes);
    taken.clear();
    for (const std::size_t p : placed)
      if (blocks[p].birth <= block.death && block.birth <= blocks[p].death)
        taken.emplace_back(layout.offsets[p], layout.offsets[p] + align(blocks[p].bytes));
    std::sort(taken.begin(), taken.end());
    std::size_t at = 0;
    for (const auto& [begin, end] : taken) {
      if (at + size <= begin) break;
      at = std::max(at, end);
    }
    layout.offsets[b] = at;
    layout.bytes = std::max(layout.bytes, at + size);
    placed.push_back(b);
  }
  return layout;
}

}  // namespace ringtrain
