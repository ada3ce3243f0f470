// Open MPI's TCP transport sends a message above its eager limit (64 KiB by
// default) by rendezvous: the receiver must answer before the data follows.
// On a link whose queue is full of the other direction's data, as in a ring
// all-reduce where every rank sends and receives at once, each answer waits
// behind that data: a 1 MiB ring all-reduce between 2 nodes over a shaped
// 1 Gbit/s link took 15.8 ms (0.55 Gbit/s) against 8.9 ms (0.94 Gbit/s) with
// the ring's chunks sent eagerly. Internal to the launch layer.
#pragma once

#include <cstddef>

namespace ringtrain {

// The ring's default chunk, CommOptions::ring_chunk_bytes: the launch layer
// sits below comm and cannot ask it (tests/comm checks that they agree).
inline constexpr std::size_t kDefaultRingChunkBytes = std::size_t{1} << 18;

// Before MPI_Init: unless the user (or mpirun --mca) has set
// OMPI_MCA_btl_tcp_eager_limit, raise it so that a ring chunk of
// `chunk_bytes` and its headers go eagerly. The ring posts each receive
// before the chunk arrives, so the data lands in a posted buffer. Other MPI
// libraries ignore the variable.
void choose_tcp_eager_limit(std::size_t chunk_bytes = kDefaultRingChunkBytes);

// The limit chosen for a chunk: the chunk and room for the headers.
std::size_t tcp_eager_limit_for(std::size_t chunk_bytes);

}  // namespace ringtrain
