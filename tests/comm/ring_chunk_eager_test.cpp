// The launch layer raises Open MPI's TCP eager limit for the ring's default
// chunk before MPI_Init, below comm; the two defaults must agree.
#include <catch2/catch.hpp>

#include "launch/tcp_eager_limit.h"
#include "ringtrain/comm/communicator.h"

using namespace ringtrain;

TEST_CASE("the eager limit's chunk is the ring's default chunk") {
  CHECK(kDefaultRingChunkBytes == CommOptions{}.ring_chunk_bytes);
  CHECK(tcp_eager_limit_for(CommOptions{}.ring_chunk_bytes) > CommOptions{}.ring_chunk_bytes);
}
