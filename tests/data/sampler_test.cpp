// The sharding contract of DESIGN.md, checked across real ranks: every rank
// builds its own sampler, and the ranks' indices are gathered and compared.
#include <mpi.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <set>

#include "ringtrain/core/error.h"
#include "ringtrain/data/sharded_sampler.h"
#include "tests/support/mpi_test.h"

using namespace ringtrain;

namespace {

std::vector<std::uint64_t> allgather_u64(const std::vector<std::uint64_t>& mine, int world) {
  int count = static_cast<int>(mine.size());
  std::vector<int> counts(static_cast<std::size_t>(world)), displs(static_cast<std::size_t>(world));
  MPI_Allgather(&count, 1, MPI_INT, counts.data(), 1, MPI_INT, MPI_COMM_WORLD);
  int total = 0;
  for (int r = 0; r < world; ++r) {
    displs[static_cast<std::size_t>(r)] = total;
    total += counts[static_cast<std::size_t>(r)];
  }
  std::vector<std::uint64_t> all(static_cast<std::size_t>(total));
  MPI_Allgatherv(mine.data(), count, MPI_UINT64_T, all.data(), counts.data(), displs.data(),
                 MPI_UINT64_T, MPI_COMM_WORLD);
  return all;
}

// The sizes of the issue: 1, G-1, G, G+1, 1003 and 60000 (sampler only).
std::vector<std::size_t> sizes_for(std::size_t g) {
  std::vector<std::size_t> n = {1, g - 1, g, g + 1, 2 * g + 1, 1003, 60000};
  n.erase(std::remove(n.begin(), n.end(), std::size_t{0}), n.end());
  return n;
}

}  // namespace

TEST_CASE("training: the ranks' indices are exactly the first floor(N/G)*G of the permutation") {
  const Topology& t = test::topology();
  const int world = t.world_size();
  for (std::size_t batch : {std::size_t{1}, std::size_t{3}, std::size_t{64}}) {
    const std::size_t g = batch * static_cast<std::size_t>(world);
    for (std::size_t n : sizes_for(g)) {
      CAPTURE(batch, n, world);
      if (n < g) {
        CHECK_THROWS_WITH(
            ShardedSampler(n, batch, t.rank(), world, 7),
            Catch::Contains("fewer than one global batch") && Catch::Contains(std::to_string(n)));
        continue;
      }
      const ShardedSampler s(n, batch, t.rank(), world, 7);
      CHECK(s.steps_per_epoch() == n / g);
      CHECK(s.dropped_per_epoch() == n % g);
      for (std::uint64_t epoch : {0u, 1u}) {
        std::vector<std::uint64_t> mine;
        for (std::uint64_t step = 0; step < s.steps_per_epoch(); ++step) {
          const auto idx = s.rank_indices({epoch, step});
          REQUIRE(idx.size() == batch);
          mine.insert(mine.end(), idx.begin(), idx.end());
        }
        // Every rank ran the same number of steps.
        const auto steps = allgather_u64({s.steps_per_epoch()}, world);
        CHECK(std::all_of(steps.begin(), steps.end(), [&](auto v) { return v == steps[0]; }));
        // Gathered in rank order and step order: step-major reordering gives
        // the permutation prefix exactly, position by position.
        const auto all = allgather_u64(mine, world);
        const auto perm = s.permutation(epoch);
        const std::size_t used = s.steps_per_epoch() * g;
        REQUIRE(all.size() == used);
        std::vector<std::uint64_t> by_position(used);
        const std::size_t per_rank = used / static_cast<std::size_t>(world);
        for (std::size_t r = 0; r < static_cast<std::size_t>(world); ++r)
          for (std::size_t k = 0; k < per_rank; ++k) {
            const std::size_t step = k / batch, j = k % batch;
            by_position[step * g + r * batch + j] = all[r * per_rank + k];
          }
        CHECK(std::equal(by_position.begin(), by_position.end(), perm.begin()));
        CHECK(std::set<std::uint64_t>(all.begin(), all.end()).size() == used);  // no duplicates
        CHECK(std::all_of(all.begin(), all.end(), [&](auto v) { return v < n; }));
      }
    }
  }
}

TEST_CASE("the permutation is the same on every rank, differs by epoch and by seed") {
  const Topology& t = test::topology();
  for (std::size_t n : {std::size_t{5}, std::size_t{1003}, std::size_t{60000}}) {
    CAPTURE(n);
    const ShardedSampler s(n, 1, t.rank(), t.world_size(), 42);
    const auto p0 = s.permutation(0);
    // A permutation of 0..n-1.
    auto sorted = p0;
    std::sort(sorted.begin(), sorted.end());
    for (std::size_t i = 0; i < n; ++i) REQUIRE(sorted[i] == i);
    // Rank 0's permutation, broadcast, equals everyone's own.
    auto root = p0;
    MPI_Bcast(root.data(), static_cast<int>(n), MPI_UINT64_T, 0, MPI_COMM_WORLD);
    CHECK(root == p0);
    CHECK(s.permutation(1) != p0);
    CHECK(s.permutation(0) == p0);
    CHECK(ShardedSampler(n, 1, 0, 1, 42).permutation(0) == p0);
    CHECK(ShardedSampler(n, 1, 0, 1, 43).permutation(0) != p0);
  }
  CHECK(ShardedSampler(1, 1, 0, 1, 0).permutation(3) == std::vector<std::uint64_t>{0});
}

TEST_CASE("evaluation covers 0..N-1 exactly once across ranks, no padding") {
  const Topology& t = test::topology();
  const int world = t.world_size();
  for (std::size_t n : {std::size_t{0}, std::size_t{1}, std::size_t{2}, std::size_t{3},
                        std::size_t{4}, std::size_t{5}, std::size_t{1003}, std::size_t{60000}}) {
    CAPTURE(n);
    const EvalShard mine = eval_shard(n, t.rank(), world);
    const auto all = allgather_u64({mine.begin, mine.end}, world);
    std::uint64_t expect_begin = 0;
    std::size_t min_size = n, max_size = 0;
    for (int r = 0; r < world; ++r) {
      CHECK(all[2 * static_cast<std::size_t>(r)] == expect_begin);
      const std::size_t size =
          all[2 * static_cast<std::size_t>(r) + 1] - all[2 * static_cast<std::size_t>(r)];
      min_size = std::min(min_size, size);
      max_size = std::max(max_size, size);
      expect_begin = all[2 * static_cast<std::size_t>(r) + 1];
    }
    CHECK(expect_begin == n);
    CHECK(max_size - min_size <= 1);
  }
}

TEST_CASE("cursor: next rolls over epochs, past-the-end steps are an error") {
  const ShardedSampler s(10, 2, 0, 2, 1);  // G = 4: 2 steps, 2 dropped
  CHECK(s.next({0, 0}) == DataCursor{0, 1});
  CHECK(s.next({0, 1}) == DataCursor{1, 0});
  CHECK(s.normalize({3, 2}) == DataCursor{4, 0});
  CHECK_THROWS_WITH(s.rank_indices({0, 2}), Catch::Contains("past the end"));
  CHECK_THROWS_WITH(ShardedSampler(10, 0, 0, 1, 1), Catch::Contains("--batch"));
}

TEST_CASE("resume: the same world continues exactly; 2 -> 4 ranks continues at the same sample") {
  const std::size_t n = 1003, batch = 8;
  // A run on 2 ranks stops after step 6 of epoch 1 (cursor = next step to run).
  const DataCursor stop{1, 6};
  const std::size_t g2 = 2 * batch, g4 = 4 * batch;
  const DataCursor resumed = ShardedSampler::convert_cursor(stop, g2, g4);
  CHECK(resumed == DataCursor{1, 3});
  // What 4 ranks read from the resumed cursor on is what the permutation holds
  // from position stop.step * g2 on: no sample skipped, none repeated.
  const auto perm = ShardedSampler(n, batch, 0, 4, 9).permutation(1);
  std::vector<std::uint64_t> after;
  for (std::uint64_t step = resumed.step; step < n / g4; ++step)
    for (int r = 0; r < 4; ++r) {
      const auto idx = ShardedSampler(n, batch, r, 4, 9).rank_indices({1, step});
      after.insert(after.end(), idx.begin(), idx.end());
    }
  const std::size_t pos = stop.step * g2;
  REQUIRE(after.size() == (n / g4 - resumed.step) * g4);
  CHECK(std::equal(after.begin(), after.end(), perm.begin() + static_cast<std::ptrdiff_t>(pos)));
  // And what 2 ranks had read before is exactly the part before that position.
  std::vector<std::uint64_t> before;
  for (std::uint64_t step = 0; step < stop.step; ++step)
    for (int r = 0; r < 2; ++r) {
      const auto idx = ShardedSampler(n, batch, r, 2, 9).rank_indices({1, step});
      before.insert(before.end(), idx.begin(), idx.end());
    }
  CHECK(std::equal(before.begin(), before.end(), perm.begin()));
  // The same world size: the identity.
  CHECK(ShardedSampler::convert_cursor(stop, g2, g2) == stop);
  // 4 -> 2 as well; 2 -> 3 ranks at an odd step is not possible.
  CHECK(ShardedSampler::convert_cursor({0, 5}, g4, g2) == DataCursor{0, 10});
  CHECK_THROWS_WITH(ShardedSampler::convert_cursor({0, 5}, g2, 3 * batch),
                    Catch::Contains("not a multiple of the new global batch"));
}

TEST_CASE("global batch: G samples per step split floor/ceil over any world, same as 1 rank") {
  const Topology& t = test::topology();
  const int world = t.world_size();
  const std::size_t w = static_cast<std::size_t>(world);
  for (std::size_t g : {w, w + 1, std::size_t{64}, std::size_t{67}}) {
    const std::size_t n = 3 * g + 5;
    CAPTURE(g, n, world);
    const ShardedSampler s = ShardedSampler::split_global(n, g, t.rank(), world, 9);
    const ShardedSampler one = ShardedSampler::split_global(n, g, 0, 1, 9);
    CHECK(s.global_batch() == g);
    CHECK(s.steps_per_epoch() == n / g);
    CHECK(s.max_batch_per_rank() == (g + w - 1) / w);
    const std::size_t mine = s.batch_per_rank();
    CHECK((mine == g / w || mine == (g + w - 1) / w));
    for (std::uint64_t step = 0; step < s.steps_per_epoch(); ++step) {
      const auto idx = s.rank_indices({1, step});
      CHECK(idx.size() == mine);
      // Gathered in rank order, the ranks' pieces are exactly one rank's window.
      CHECK(allgather_u64(idx, world) == one.rank_indices({1, step}));
    }
  }
  if (world > 1)
    CHECK_THROWS_WITH(ShardedSampler::split_global(100, w - 1, t.rank(), world, 9),
                      Catch::Contains("cannot give each of"));
  CHECK_THROWS_WITH(ShardedSampler::split_global(10, 11, t.rank(), world, 9),
                    Catch::Contains("fewer than one global batch"));
}
