#include "apps/bench_collective_table.h"

#include <array>

#include "apps/bench_test_data.h"

namespace ringtrain::apps {

namespace {

std::size_t per_rank(std::size_t bytes, std::size_t es, int) {
  return bytes / es;
}
std::size_t gathered_total(std::size_t bytes, std::size_t es, int ranks) {
  return bytes / es / static_cast<std::size_t>(ranks);  // sizes are the gathered total
}
std::size_t same_count(std::size_t count, int) {
  return count;
}
std::size_t times_ranks(std::size_t count, int ranks) {
  return count * static_cast<std::size_t>(ranks);
}
std::size_t at_start(std::size_t, int) {
  return 0;
}
std::size_t at_rank_block(std::size_t count, int rank) {
  return count * static_cast<std::size_t>(rank);
}

constexpr std::array<CollectiveEntry, 3> kEntries{{
    {"allreduce", "All-reduce bandwidth per backend and size (nccl-tests style)", 10, true, false,
     per_rank, same_count, at_start, [](int n) { return 2.0 * (n - 1) / n; },
     [](Communicator& c, BufferView in, BufferView out, const CollectiveArgs& a) {
       c.allreduce(in, out, a.op);
     },
     [](BufferView out, std::size_t, const CollectiveArgs& a) {
       return count_wrong_reduction(out, a.op, a.ranks, a.seed, a.rounding_steps);
     }},
    {"broadcast", "Broadcast bandwidth per backend and size (nccl-tests style)", 11, false, true,
     per_rank, same_count, at_start, [](int) { return 1.0; },
     [](Communicator& c, BufferView in, BufferView out, const CollectiveArgs& a) {
       c.broadcast(in, out, a.root);
     },
     [](BufferView out, std::size_t, const CollectiveArgs& a) {
       return count_wrong_copy(out, a.seed, a.root);
     }},
    {"allgather", "All-gather bandwidth per backend and size (nccl-tests style)", 12, false, false,
     gathered_total, times_ranks, at_rank_block, [](int n) { return (n - 1.0) / n; },
     [](Communicator& c, BufferView in, BufferView out, const CollectiveArgs&) {
       c.allgather(in, out);
     },
     [](BufferView out, std::size_t count, const CollectiveArgs& a) {
       std::size_t wrong = 0;
       for (int q = 0; q < a.ranks; ++q)
         wrong +=
             count_wrong_copy(out.slice(static_cast<std::size_t>(q) * count, count), a.seed, q);
       return wrong;
     }},
}};

}  // namespace

std::span<const CollectiveEntry> collective_entries() {
  return kEntries;
}

}  // namespace ringtrain::apps
