// ParamGradientSync, the user-loop gradient averaging (np 1-3): tensors
// registered in backward order over a flat buffer, several buckets, marked
// ready one by one; the buffer ends as the average over ranks. Misuse (a gap
// in the layout, marking out of order, waiting before every tensor is ready)
// is an Error naming the tensor.
#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include "ringtrain/comm/communicator.h"
#include "ringtrain/core/error.h"
#include "ringtrain/sync/param_gradient_sync.h"
#include "tests/support/mpi_test.h"

using namespace ringtrain;
using Catch::Matchers::Contains;

namespace {

float gradient_of(int rank, std::size_t i, int step) {
  return static_cast<float>(rank + 1) * 0.25f + static_cast<float>((i + step) % 11);
}

}  // namespace

TEST_CASE("tensors in backward order, several buckets: the buffer ends averaged") {
  auto comm = make_communicator("shm", test::topology());
  // fc1.weight [0, 120), fc1.bias [120, 130), fc2.weight [130, 230), fc2.bias [230, 233)
  BufferView grads = comm->allocate(233, DType::f32);
  ParamGradientSync sync(*comm, grads, /*bucket_cap_bytes=*/256);
  CHECK(sync.add_param("fc2.bias", 230, 3) == 0);
  sync.add_param("fc2.weight", 130, 100);
  sync.add_param("fc1.bias", 120, 10);
  sync.add_param("fc1.weight", 0, 120);
  REQUIRE(sync.buckets().buckets().size() >= 3);
  CHECK_THROWS_WITH(sync.add_param("late", 0, 1), Contains("after the buckets were fixed"));
  auto* g = static_cast<float*>(grads.ptr);
  for (int step = 0; step < 3; ++step) {
    sync.begin_step();
    for (std::size_t id = 0; id < 4; ++id) {
      // "Backward" writes this tensor's gradient, then reports it ready.
      const std::size_t lo[] = {230, 130, 120, 0}, n[] = {3, 100, 10, 120};
      for (std::size_t i = lo[id]; i < lo[id] + n[id]; ++i)
        g[i] = gradient_of(comm->rank(), i, step);
      sync.mark_ready(id);
    }
    sync.wait();
    std::size_t wrong = 0;
    for (std::size_t i = 0; i < 233; ++i) {
      double sum = 0;
      for (int r = 0; r < comm->size(); ++r) sum += gradient_of(r, i, step);
      wrong += std::abs(g[i] - sum / comm->size()) > 1e-5 * (1.0 + sum / comm->size());
    }
    CHECK(wrong == 0);
  }
  sync.begin_step();
  CHECK_THROWS_WITH(sync.mark_ready(1), Contains("'fc2.weight' marked ready out of order") &&
                                            Contains("expected 'fc2.bias'"));
  sync.mark_ready(0);
  CHECK_THROWS_WITH(sync.wait(), Contains("'fc2.weight' and 2 more tensor(s) never marked ready"));
  comm->barrier();
}

TEST_CASE("a layout with a gap is refused, naming the tensor") {
  auto comm = make_communicator("shm", test::topology());
  BufferView grads = comm->allocate(20, DType::f32);
  ParamGradientSync sync(*comm, grads);
  sync.add_param("b", 12, 8);
  sync.add_param("a", 0, 10);  // b should start at 10
  CHECK_THROWS_WITH(sync.buckets(), Contains("'b' starts at element 12, expected 10"));
  CHECK_THROWS_WITH(sync.add_param("c", 15, 10), Contains("outside the gradient buffer"));
  comm->barrier();
}
