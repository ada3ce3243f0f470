#include "apps/bench_test_data.h"

#include "comm/collective_reference.h"

namespace ringtrain::apps {

// The data and the rule are the collectives tests' (comm/collective_reference.h).
void fill_test_data(BufferView v, std::uint64_t seed, int rank) {
  collective_reference::fill_input(v.dtype, v.ptr, v.count, seed, rank);
}

// rounding_steps: how often the backend may round a partial sum in the
// element type (communicator.h): 1 on the CPU backends, n + 1 for NCCL.
std::size_t count_wrong_reduction(BufferView out, ReduceOp op, int n, std::uint64_t seed,
                                  int rounding_steps) {
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < out.count; ++i)
    wrong += !collective_reference::matches_reduction(out.dtype, op, n, seed, i, out.ptr, i,
                                                      rounding_steps);
  return wrong;
}

std::size_t count_wrong_copy(BufferView out, std::uint64_t seed, int rank) {
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < out.count; ++i)
    wrong += !collective_reference::matches_input(out.dtype, rank, seed, i, out.ptr, i);
  return wrong;
}

}  // namespace ringtrain::apps
