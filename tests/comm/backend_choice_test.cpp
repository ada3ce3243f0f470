// Which gradient backend a job gets: NCCL on GPU ranks, shm (staged through
// pinned memory) when ranks share a GPU, and clear errors for nccl where it
// cannot work. The rule is a pure function, so it is tested without GPUs.
#include <catch2/catch.hpp>

#include "ringtrain/comm/communicator.h"
#include "ringtrain/core/error.h"

using namespace ringtrain;
using Catch::Matchers::Contains;

TEST_CASE("auto: nccl on GPU ranks, shm on CPU ranks and on shared GPUs") {
  CHECK(resolve_backend("auto", /*gpu_rank=*/true, /*any_gpu_shared=*/false, 0, "cuda:0") ==
        "nccl");
  CHECK(resolve_backend("auto", false, false, 0, "cpu") == "shm");
  CHECK(resolve_backend("auto", true, true, 1, "cuda:0") == "shm");
}

TEST_CASE("host backends are kept as named, on CPU and (staged) on GPU ranks") {
  for (const char* kind : {"shm", "ring", "mpi"}) {
    CHECK(resolve_backend(kind, false, false, 0, "cpu") == kind);
    CHECK(resolve_backend(kind, true, true, 0, "cuda:0") == kind);
  }
}

TEST_CASE("nccl where it cannot work is an error naming the rank and device, before NCCL starts") {
  CHECK(resolve_backend("nccl", true, false, 3, "cuda:1") == "nccl");
  CHECK_THROWS_WITH(resolve_backend("nccl", true, true, 2, "cuda:0"),
                    Contains("ranks share a GPU") && Contains("rank 2 is on cuda:0") &&
                        Contains("--backend auto or shm"));
  CHECK_THROWS_WITH(resolve_backend("nccl", false, false, 1, "cpu"),
                    Contains("needs a GPU rank") && Contains("rank 1 runs on cpu"));
  CHECK_THROWS_WITH(resolve_backend("gloo", false, false, 0, "cpu"),
                    Contains("unknown backend 'gloo'"));
}
