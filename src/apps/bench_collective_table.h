// What the collective benchmark knows of each collective, one table entry
// each (as nccl-tests' testColl): how to size, run and check it, and its
// bus-bandwidth factor. The harness (bench_collectives_command.cpp) has no
// branch on the collective, so adding one (reduce-scatter, say) is one entry.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "ringtrain/comm/communicator.h"
#include "ringtrain/core/buffer_view.h"

namespace ringtrain::apps {

// The flags that shape a call, and the data it is checked against.
struct CollectiveArgs {
  ReduceOp op = ReduceOp::sum;
  int root = 0;
  int ranks = 1;
  int rank = 0;
  std::uint64_t seed = 1;
  int rounding_steps = 1;  // roundings in the element type the backend may make
};

struct CollectiveEntry {
  const char* name;     // the bench subcommand
  const char* summary;  // its --help line
  int order;            // its place among the bench subcommands
  bool takes_op;        // --op applies
  bool takes_root;      // --root applies
  // Elements per rank's input for a row of `bytes` (nccl-tests' sizes).
  std::size_t (*input_count)(std::size_t bytes, std::size_t element_size, int ranks);
  std::size_t (*output_count)(std::size_t input_count, int ranks);
  // Where this rank's input lies in the output when run in place.
  std::size_t (*inplace_offset)(std::size_t input_count, int rank);
  double (*bus_factor)(int ranks);
  void (*run)(Communicator& comm, BufferView in, BufferView out, const CollectiveArgs& args);
  // Wrong elements of this rank's output, copied to the host.
  std::size_t (*count_wrong)(BufferView host_out, std::size_t input_count,
                             const CollectiveArgs& args);
};

std::span<const CollectiveEntry> collective_entries();

}  // namespace ringtrain::apps
