// The ring algorithms with ranks as threads (InProcessRingTransport): every
// rank count from 1 to 16, uneven sizes, every dtype and op, in and out of
// place, plus size-mismatch detection and the timeout of a rank that never
// joins. No mpirun.
#include <catch2/catch.hpp>

#include <atomic>
#include <exception>
#include <functional>
#include <thread>
#include <vector>

#include "comm/collective_reference.h"
#include "comm/in_process_ring_transport.h"
#include "comm/ring_algorithms.h"

using namespace ringtrain;
using namespace ringtrain::comm_detail;

namespace {

// Runs body(transport) on n threads; returns each rank's exception (or null).
std::vector<std::exception_ptr> run_ranks(int n, const std::function<void(RingTransport&)>& body) {
  InProcessRingHub hub(n);
  std::vector<std::exception_ptr> errors(static_cast<std::size_t>(n));
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      InProcessRingTransport t(hub, r);
      try {
        body(t);
      } catch (...) {
        errors[static_cast<std::size_t>(r)] = std::current_exception();
      }
    });
  for (auto& th : threads) th.join();
  return errors;
}

void require_no_errors(const std::vector<std::exception_ptr>& errors) {
  for (std::size_t r = 0; r < errors.size(); ++r) {
    if (!errors[r]) continue;
    try {
      std::rethrow_exception(errors[r]);
    } catch (const std::exception& e) {
      FAIL("rank " << r << " threw: " << e.what());
    }
  }
}

std::vector<std::size_t> sizes_for(int n) {
  const std::size_t un = static_cast<std::size_t>(n);
  return {0, 1, un > 1 ? un - 1 : 0, un, un + 1, 4099};
}

const Deadline kGenerous(60);

}  // namespace

TEST_CASE(
    "ring all-reduce over 1..16 in-process ranks: every dtype, op, uneven size, in and out of "
    "place") {
  for (int n = 1; n <= 16; ++n) {
    for (std::size_t count : sizes_for(n)) {
      for (DType dt : kAllDTypes) {
        for (ReduceOp op : kAllReduceOps) {
          for (bool in_place : {false, true}) {
            const std::uint64_t seed = count * 13 + static_cast<std::uint64_t>(n);
            std::atomic<std::size_t> wrong{0};
            RingConfig config;
            config.chunk_bytes = 256;  // many chunks even on small buffers: exercises the pipeline
            auto errors = run_ranks(n, [&](RingTransport& t) {
              const std::size_t es = dtype_size(dt);
              std::vector<char> in(count * es + 1), out(count * es + 1);
              collective_reference::fill_input(dt, in.data(), count, seed, t.rank());
              BufferView vin{in.data(), count, dt, Device::cpu()};
              BufferView vout = in_place ? vin : BufferView{out.data(), count, dt, Device::cpu()};
              RingScratch scratch;
              ring_allreduce(t, vin, vout, op, config, kGenerous, scratch);
              for (std::size_t i = 0; i < count; ++i)
                if (!collective_reference::matches_reduction(dt, op, n, seed, i, vout.ptr, i))
                  ++wrong;
            });
            require_no_errors(errors);
            INFO("ranks " << n << " count " << count << " dtype " << dtype_name(dt) << " op "
                          << reduce_op_name(op) << (in_place ? " in place" : " out of place"));
            REQUIRE(wrong.load() == 0);
          }
        }
      }
    }
  }
}

TEST_CASE("ring reduce-scatter, all-gather and broadcast over 1..16 in-process ranks") {
  for (int n = 1; n <= 16; ++n) {
    const std::size_t un = static_cast<std::size_t>(n);
    for (std::size_t block : {std::size_t{0}, std::size_t{1}, std::size_t{3}, std::size_t{1031}}) {
      for (DType dt : {DType::f32, DType::bf16, DType::i64}) {
        for (bool in_place : {false, true}) {
          const std::uint64_t seed = block * 7 + un;
          std::atomic<std::size_t> wrong{0};
          RingConfig config;
          config.chunk_bytes = 512;
          auto errors = run_ranks(n, [&](RingTransport& t) {
            const std::size_t es = dtype_size(dt), r = static_cast<std::size_t>(t.rank());
            RingScratch scratch;
            // reduce-scatter (avg, so the division is covered too)
            std::vector<char> big(block * un * es + 1), small(block * es + 1);
            collective_reference::fill_input(dt, big.data(), block * un, seed, t.rank());
            BufferView vbig{big.data(), block * un, dt, Device::cpu()};
            BufferView vsmall = in_place ? vbig.slice(r * block, block)
                                         : BufferView{small.data(), block, dt, Device::cpu()};
            ring_reduce_scatter(t, vbig, vsmall, ReduceOp::avg, config, kGenerous, scratch);
            for (std::size_t i = 0; i < block; ++i)
              if (!collective_reference::matches_reduction(dt, ReduceOp::avg, n, seed,
                                                           r * block + i, vsmall.ptr, i))
                ++wrong;
            // all-gather
            std::vector<char> gathered(block * un * es + 1), mine(block * es + 1);
            BufferView vg{gathered.data(), block * un, dt, Device::cpu()};
            BufferView vm = in_place ? vg.slice(r * block, block)
                                     : BufferView{mine.data(), block, dt, Device::cpu()};
            collective_reference::fill_input(dt, vm.ptr, block, seed + 1, t.rank());
            ring_allgather(t, vm, vg, config, kGenerous);
            for (std::size_t q = 0; q < un; ++q)
              for (std::size_t i = 0; i < block; ++i)
                if (!collective_reference::matches_input(dt, static_cast<int>(q), seed + 1, i,
                                                         vg.ptr, q * block + i))
                  ++wrong;
            // broadcast from the last rank
            const int root = n - 1;
            std::vector<char> src(block * es + 1), dst(block * es + 1);
            if (t.rank() == root)
              collective_reference::fill_input(dt, src.data(), block, seed + 2, root);
            BufferView vs{src.data(), block, dt, Device::cpu()};
            BufferView vd = in_place ? vs : BufferView{dst.data(), block, dt, Device::cpu()};
            ring_broadcast(t, vs, vd, root, config, kGenerous);
            for (std::size_t i = 0; i < block; ++i)
              if (!collective_reference::matches_input(dt, root, seed + 2, i, vd.ptr, i)) ++wrong;
            ring_barrier(t, kGenerous, scratch);
          });
          require_no_errors(errors);
          INFO("ranks " << n << " block " << block << " dtype " << dtype_name(dt));
          REQUIRE(wrong.load() == 0);
        }
      }
    }
  }
}

TEST_CASE("ring detects counts that differ across ranks") {
  auto errors = run_ranks(3, [&](RingTransport& t) {
    const std::size_t count = t.rank() == 1 ? 1000 : 999;
    std::vector<float> buf(count, 1.5f);
    BufferView v = view_of(buf.data(), count);
    RingScratch scratch;
    ring_allreduce(t, v, v, ReduceOp::sum, RingConfig{}, Deadline(5), scratch);
  });
  bool saw_mismatch = false;
  for (auto& e : errors) {
    if (!e) continue;
    try {
      std::rethrow_exception(e);
    } catch (const CommTimeout&) {
      // a rank stuck behind the failed one times out: fine
    } catch (const Error& err) {
      saw_mismatch |= std::string(err.what()).find("different counts") != std::string::npos;
    }
  }
  REQUIRE(saw_mismatch);
}

TEST_CASE("ring: a rank that never joins makes its peers time out, naming it") {
  auto errors = run_ranks(4, [&](RingTransport& t) {
    if (t.rank() == 2) return;  // never joins
    std::vector<double> buf(100, 0.5);
    BufferView v = view_of(buf.data(), buf.size());
    RingScratch scratch;
    ring_allreduce(t, v, v, ReduceOp::sum, RingConfig{}, Deadline(0.5), scratch);
  });
  // Rank 3 waits on rank 2 directly; every waiting rank reports a timeout.
  REQUIRE(!errors[2]);
  int timeouts = 0;
  for (int r : {0, 1, 3}) {
    REQUIRE(errors[static_cast<std::size_t>(r)]);
    try {
      std::rethrow_exception(errors[static_cast<std::size_t>(r)]);
    } catch (const CommTimeout& e) {
      ++timeouts;
      if (r == 3) REQUIRE(e.peer() == 2);
    }
  }
  REQUIRE(timeouts == 3);
}
