// Every CPU backend (shm, shm in groups of two = the hierarchical path, ring,
// mpi) under mpirun with 1 to 4 ranks: sizes 0, 1, n-1, n, n+1, 4099 and
// 1,000,003; every dtype and op; in and out of place; buffers inside the
// backend's own memory and plain host buffers. Each rank checks its result
// against a reference computed in double/int64 from the (seed, rank, index)
// generator, and rank 0 additionally checks that every rank got the same bytes.
#include <mpi.h>

#include <catch2/catch.hpp>

#include <cstring>
#include <string>
#include <vector>

#include "comm/collective_reference.h"
#include "launch/mpi_context.h"
#include "ringtrain/comm/communicator.h"
#include "tests/support/mpi_test.h"

using namespace ringtrain;

namespace {

struct Backend {
  std::string kind;
  CommOptions options;
  std::string label;
  bool large = true;  // also run the 1,000,003-element cases
};

std::vector<Backend> backends() {
  std::vector<Backend> out = {{"shm", {}, "shm"}, {"ring", {}, "ring"}, {"mpi", {}, "mpi"}};
  // Groups smaller than the node run the hierarchical path on one machine: two
  // "nodes" of two ranks at np 4, one rank per "node" at np 2 and 3.
  const int n = test::topology().world_size();
  CommOptions grouped;
  grouped.shm_group_size = n % 2 == 0 && n > 2 ? 2 : 1;
  if (n >= 2) out.push_back({"shm", grouped, "shm (hierarchical)"});
  CommOptions small_chunks;
  small_chunks.ring_chunk_bytes = 1000;
  out.push_back({"ring", small_chunks, "ring (1000-byte chunks)", false});
  for (auto& b : out) b.options.timeout_seconds = 120;
  return out;
}

std::vector<std::size_t> small_sizes(int n) {
  const std::size_t un = static_cast<std::size_t>(n);
  return {0, 1, un > 1 ? un - 1 : 0, un, un + 1, 4099};
}

// The same bytes on every rank (results of reductions must agree bit for bit).
bool same_on_all_ranks(const void* data, std::size_t bytes) {
  std::uint64_t h = 1469598103934665603ull;
  const auto* p = static_cast<const unsigned char*>(data);
  for (std::size_t i = 0; i < bytes; ++i) h = (h ^ p[i]) * 1099511628211ull;
  std::uint64_t mm[2] = {h, ~h};
  MPI_Allreduce(MPI_IN_PLACE, mm, 2, MPI_UINT64_T, MPI_MAX, mpi_context::world());
  return mm[0] == ~mm[1];
}

// Backend memory for the checks, allocated once per communicator and slot and
// handed out as views: allocate() is collective and costly (a shared-memory
// window per call on shm, kept until the communicator goes), and thousands of
// checks each allocating their own would spend the test on that, not on the
// collectives. A slot grows when a larger view is asked for; every rank runs
// the same checks in the same order, so every rank grows it at the same time.
class BackendMemory {
 public:
  explicit BackendMemory(Communicator& c) : c_(c) {}
  // A view of `count` elements at the start of slot `slot`, its bytes set to a
  // pattern no check expects, so that an element a collective failed to write
  // cannot pass for a value left by an earlier check.
  BufferView take(int slot, std::size_t count, DType dt) {
    BufferView& s = slots_[static_cast<std::size_t>(slot)];
    const std::size_t bytes = count * dtype_size(dt);
    if (s.ptr == nullptr || s.bytes() < bytes) s = c_.allocate(bytes / 8 + 1, DType::f64);
    std::memset(s.ptr, 0xA5, bytes);
    return {s.ptr, count, dt, Device::cpu()};
  }

 private:
  Communicator& c_;
  BufferView slots_[4];
};

// A buffer either from the backend's memory or the heap.
struct Buffer {
  std::vector<char> heap;
  BufferView view;
  Buffer(BackendMemory& memory, int slot, bool backend_memory, std::size_t count, DType dt) {
    if (backend_memory) {
      view = memory.take(slot, count, dt);
    } else {
      heap.resize(count * dtype_size(dt) + 8);
      view = {heap.data(), count, dt, Device::cpu()};
    }
  }
};

void check_allreduce(Communicator& c, BackendMemory& memory, std::size_t count, DType dt,
                     ReduceOp op, bool in_place, bool backend_memory, std::uint64_t seed) {
  Buffer in(memory, 0, backend_memory, count, dt), out(memory, 1, backend_memory, count, dt);
  collective_reference::fill_input(dt, in.view.ptr, count, seed, c.rank());
  BufferView vout = in_place ? in.view : out.view;
  c.allreduce(in.view, vout, op);
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < count; ++i)
    wrong += !collective_reference::matches_reduction(dt, op, c.size(), seed, i, vout.ptr, i);
  INFO(c.name() << " allreduce count " << count << " " << dtype_name(dt) << " "
                << reduce_op_name(op) << (in_place ? " in place" : " out of place")
                << (backend_memory ? " backend memory" : " heap"));
  CHECK(wrong == 0);
  CHECK(same_on_all_ranks(vout.ptr, vout.bytes()));
  if (!in_place) {
    // The input is left alone.
    std::size_t changed = 0;
    for (std::size_t i = 0; i < count; ++i)
      changed += !collective_reference::matches_input(dt, c.rank(), seed, i, in.view.ptr, i);
    CHECK(changed == 0);
  }
}

}  // namespace

TEST_CASE("allreduce: every backend, dtype, op, small uneven size, in and out of place") {
  const int n = test::topology().world_size();
  for (const Backend& b : backends()) {
    auto c = make_communicator(b.kind, test::topology(), b.options);
    BackendMemory memory(*c);
    for (std::size_t count : small_sizes(n))
      for (DType dt : kAllDTypes)
        for (ReduceOp op : kAllReduceOps)
          for (bool in_place : {false, true})
            for (bool backend_memory : {false, true}) {
              INFO(b.label);
              check_allreduce(*c, memory, count, dt, op, in_place, backend_memory, count * 3 + 1);
            }
  }
}

TEST_CASE("allreduce: 1,000,003 elements (larger than the shm staging area)") {
  for (const Backend& b : backends()) {
    if (!b.large) continue;
    auto c = make_communicator(b.kind, test::topology(), b.options);
    BackendMemory memory(*c);
    INFO(b.label);
    check_allreduce(*c, memory, 1000003, DType::f32, ReduceOp::sum, false, false, 11);
    check_allreduce(*c, memory, 1000003, DType::f32, ReduceOp::sum, true, true, 12);
    check_allreduce(*c, memory, 1000003, DType::bf16, ReduceOp::avg, true, false, 13);
    check_allreduce(*c, memory, 1000003, DType::f64, ReduceOp::max, false, true, 14);
    check_allreduce(*c, memory, 1000003, DType::i64, ReduceOp::min, true, false, 15);
    check_allreduce(*c, memory, 1000003, DType::f16, ReduceOp::sum, false, true, 16);
    check_allreduce(*c, memory, 1000003, DType::i32, ReduceOp::avg, false, false, 17);
  }
}

TEST_CASE("broadcast, allgather, reduce_scatter, barrier: every backend and dtype") {
  const int n = test::topology().world_size();
  const std::size_t un = static_cast<std::size_t>(n);
  for (const Backend& b : backends()) {
    auto c = make_communicator(b.kind, test::topology(), b.options);
    BackendMemory memory(*c);
    const std::size_t r = static_cast<std::size_t>(c->rank());
    std::vector<std::size_t> counts = small_sizes(n);
    if (b.large) counts.push_back(1000003);
    for (std::size_t count : counts)
      for (DType dt : kAllDTypes)
        for (bool in_place : {false, true})
          for (bool backend_memory : {false, true}) {
            if (count > 5000 && !((dt == DType::f32 && !in_place && !backend_memory) ||
                                  (dt == DType::bf16 && in_place && backend_memory)))
              continue;
            INFO(b.label << " count " << count << " " << dtype_name(dt)
                         << (in_place ? " in place" : "")
                         << (backend_memory ? " backend memory" : " heap"));
            const std::uint64_t seed = count + 101;
            // broadcast from every rank (the hierarchical path routes by the
            // root's group and column); large sizes from the last rank only
            for (int root = count > 5000 ? n - 1 : 0; root < n; ++root) {
              Buffer src(memory, 0, backend_memory, count, dt),
                  dst(memory, 1, backend_memory, count, dt);
              if (c->rank() == root)
                collective_reference::fill_input(dt, src.view.ptr, count, seed, root);
              BufferView out = in_place ? src.view : dst.view;
              c->broadcast(src.view, out, root);
              std::size_t wrong = 0;
              for (std::size_t i = 0; i < count; ++i)
                wrong += !collective_reference::matches_input(dt, root, seed, i, out.ptr, i);
              INFO("root " << root);
              CHECK(wrong == 0);
            }
            // allgather
            {
              Buffer all(memory, 2, backend_memory, count * un, dt),
                  mine(memory, 3, backend_memory, count, dt);
              BufferView in = in_place ? all.view.slice(r * count, count) : mine.view;
              collective_reference::fill_input(dt, in.ptr, count, seed + 1, c->rank());
              c->allgather(in, all.view);
              std::size_t wrong = 0;
              for (std::size_t q = 0; q < un; ++q)
                for (std::size_t i = 0; i < count; ++i)
                  wrong += !collective_reference::matches_input(dt, static_cast<int>(q), seed + 1,
                                                                i, all.view.ptr, q * count + i);
              CHECK(wrong == 0);
            }
            // reduce_scatter, every op
            for (ReduceOp op : kAllReduceOps) {
              if (count > 5000 && op != ReduceOp::avg) continue;
              Buffer all(memory, 2, backend_memory, count * un, dt),
                  mine(memory, 3, backend_memory, count, dt);
              collective_reference::fill_input(dt, all.view.ptr, count * un, seed + 2, c->rank());
              BufferView out = in_place ? all.view.slice(r * count, count) : mine.view;
              c->reduce_scatter(all.view, out, op);
              std::size_t wrong = 0;
              for (std::size_t i = 0; i < count; ++i)
                wrong += !collective_reference::matches_reduction(dt, op, n, seed + 2,
                                                                  r * count + i, out.ptr, i);
              INFO(reduce_op_name(op));
              CHECK(wrong == 0);
            }
            c->barrier();
          }
  }
}

TEST_CASE("allreduce: ranks mixing window and heap buffers agree on how to split the work") {
  // shm reduces window buffers in one piece but stages heap buffers in pieces;
  // the ranks must agree from the published descriptors. Odd ranks pass heap
  // memory (input, output or both), even ranks window memory, over more than
  // one staging area.
  const std::size_t count = 1500007;
  const int rank = test::topology().rank();
  for (const Backend& b : backends()) {
    if (!b.large) continue;
    auto c = make_communicator(b.kind, test::topology(), b.options);
    BackendMemory memory(*c);
    INFO(b.label);
    for (int variant = 0; variant < 3; ++variant) {
      // allocate() is collective: every rank allocates, odd ranks then swap
      // in heap memory for the input (variant 0, 2) and/or output (1, 2).
      Buffer in_window(memory, 0, true, count, DType::f32),
          out_window(memory, 1, true, count, DType::f32);
      Buffer in_heap(memory, 2, false, count, DType::f32),
          out_heap(memory, 3, false, count, DType::f32);
      const bool odd = rank % 2 == 1;
      BufferView in = odd && variant != 1 ? in_heap.view : in_window.view;
      BufferView out = odd && variant != 0 ? out_heap.view : out_window.view;
      const std::uint64_t seed = 40 + static_cast<std::uint64_t>(variant);
      collective_reference::fill_input(DType::f32, in.ptr, count, seed, c->rank());
      c->allreduce(in, out, ReduceOp::sum);
      std::size_t wrong = 0;
      for (std::size_t i = 0; i < count; ++i)
        wrong += !collective_reference::matches_reduction(DType::f32, ReduceOp::sum, c->size(),
                                                          seed, i, out.ptr, i);
      INFO("variant " << variant);
      CHECK(wrong == 0);
    }
  }
}

TEST_CASE("async requests complete in issue order with several outstanding") {
  for (const Backend& b : backends()) {
    auto c = make_communicator(b.kind, test::topology(), b.options);
    INFO(b.label);
    const std::size_t buckets = 6, count = 30011;
    std::vector<BufferView> views;
    for (std::size_t k = 0; k < buckets; ++k) {
      views.push_back(c->allocate(count, DType::f32));
      collective_reference::fill_input(DType::f32, views.back().ptr, count, 500 + k, c->rank());
    }
    std::vector<CommRequest> requests;
    for (std::size_t k = 0; k < buckets; ++k)
      requests.push_back(
          c->allreduce_async(views[k], views[k], k % 2 ? ReduceOp::avg : ReduceOp::sum));
    requests.push_back(c->barrier_async());
    // Waiting on the last one means all earlier ones are done too.
    requests.back().wait();
    for (std::size_t k = 0; k < buckets; ++k) CHECK(requests[k].test());
    for (auto& r : requests) r.wait();
    // Each ran after the one issued before it, and says when (the trace's
    // 'allreduce bucket k ran' spans).
    for (std::size_t k = 0; k < requests.size(); ++k) {
      const CommRequest::RunTimes ran = requests[k].run_times();
      CHECK(ran.began_s > 0);
      CHECK(ran.began_s <= ran.finished_s);
      if (k > 0) CHECK(requests[k - 1].run_times().finished_s <= ran.began_s);
    }
    CHECK(CommRequest().run_times().finished_s < 0);
    for (std::size_t k = 0; k < buckets; ++k) {
      std::size_t wrong = 0;
      for (std::size_t i = 0; i < count; ++i)
        wrong += !collective_reference::matches_reduction(DType::f32,
                                                          k % 2 ? ReduceOp::avg : ReduceOp::sum,
                                                          c->size(), 500 + k, i, views[k].ptr, i);
      CHECK(wrong == 0);
    }
    // A blocking call after async ones runs after them.
    std::vector<float> x(7, static_cast<float>(c->rank() + 1));
    auto req =
        c->allreduce_async(view_of(x.data(), x.size()), view_of(x.data(), x.size()), ReduceOp::max);
    c->barrier();
    CHECK(req.test());
    CHECK(x[3] == static_cast<float>(c->size()));
  }
}

TEST_CASE("argument errors name the problem") {
  auto c = make_communicator("ring", test::topology(), {});
  std::vector<float> a(10), b(9);
  CHECK_THROWS_WITH(c->allreduce(view_of(a.data(), 10), view_of(b.data(), 9), ReduceOp::sum),
                    Catch::Contains("input has 10 elements, output 9"));
  CHECK_THROWS_WITH(c->broadcast(view_of(a.data(), 10), view_of(a.data(), 10), c->size()),
                    Catch::Contains("root"));
  CHECK_THROWS_WITH(make_communicator("tcp", test::topology(), {}),
                    Catch::Contains("unknown backend 'tcp'"));
  CHECK_THROWS_WITH(parse_reduce_op("prod"), Catch::Contains("prod"));
  CHECK(available_backends(test::topology()) == std::vector<std::string>{"shm", "ring", "mpi"});
}
