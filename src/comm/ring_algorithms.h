// The ring collectives over a RingTransport: all-reduce as a chunked,
// pipelined reduce-scatter plus all-gather (baidu-allreduce's textbook ring,
// 2(n-1)/n * S bytes sent per rank), and the reduce-scatter, all-gather,
// broadcast and barrier built from the same phases. Sizes need not divide by
// the rank count. Counts that differ across ranks are detected when a message
// arrives with an unexpected size; they go unnoticed only when every message
// size happens to agree (then the results are wrong but nothing hangs).
#pragma once

#include <cstddef>
#include <vector>

#include "comm/ring_transport.h"
#include "ringtrain/comm/communicator.h"

namespace ringtrain::comm_detail {

// Buffers a ring reuses from one collective to the next.
struct RingScratch {
  std::vector<char> recv[2];
  std::vector<char> work;
  std::vector<float> wide;
  std::vector<float> wide_out;
};

struct RingConfig {
  std::size_t chunk_bytes = std::size_t{1} << 18;
};

void ring_allreduce(RingTransport& t, BufferView in, BufferView out, ReduceOp op,
                    const RingConfig& config, const Deadline& deadline, RingScratch& scratch);
// in.count == out.count * t.size().
void ring_reduce_scatter(RingTransport& t, BufferView in, BufferView out, ReduceOp op,
                         const RingConfig& config, const Deadline& deadline, RingScratch& scratch);
// out.count == in.count * t.size(); in may be this rank's block of out.
void ring_allgather(RingTransport& t, BufferView in, BufferView out, const RingConfig& config,
                    const Deadline& deadline);
void ring_broadcast(RingTransport& t, BufferView in, BufferView out, int root,
                    const RingConfig& config, const Deadline& deadline);
void ring_barrier(RingTransport& t, const Deadline& deadline, RingScratch& scratch);

}  // namespace ringtrain::comm_detail
