#include <atomic>

#include "core/stream_graph.h"

namespace ringtrain::detail {

namespace {
std::atomic<std::uint64_t> generation{0};
}  // namespace

void note_graph_buffers_moved() noexcept {
  generation.fetch_add(1, std::memory_order_relaxed);
}

std::uint64_t graph_buffers_generation() noexcept {
  return generation.load(std::memory_order_relaxed);
}

}  // namespace ringtrain::detail
