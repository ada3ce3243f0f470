// The benchmark's test data: every input element is a function of (seed, rank,
// index), so every result can be checked element by element, on any backend.
#pragma once

#include <cstddef>
#include <cstdint>

#include "ringtrain/comm/communicator.h"
#include "ringtrain/core/buffer_view.h"

namespace ringtrain::apps {

// Fills a host view with rank `rank`'s input.
void fill_test_data(BufferView host, std::uint64_t seed, int rank);
// Elements of `host` that differ from the reduction of ranks 0..n-1's inputs
// by more than `rounding_steps` roundings in the element type allow.
std::size_t count_wrong_reduction(BufferView host, ReduceOp op, int n, std::uint64_t seed,
                                  int rounding_steps);
// Elements of `host` that differ (bitwise) from rank `rank`'s input.
std::size_t count_wrong_copy(BufferView host, std::uint64_t seed, int rank);

}  // namespace ringtrain::apps
