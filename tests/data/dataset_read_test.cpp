// Reading through Dataset, the prefetcher and the evaluation batches, on every
// rank of the job: values are checked element by element against the function
// that wrote them.
#include <mpi.h>

#include <fmt/format.h>
#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdlib>
#include <set>

#include "ringtrain/comm/control_channel.h"
#include "ringtrain/core/error.h"
#include "ringtrain/data/dataset.h"
#include "ringtrain/data/prefetcher.h"
#include "tests/data/data_test_files.h"
#include "tests/support/mpi_test.h"

using namespace ringtrain;

namespace {

const std::vector<std::size_t> kShape = {1, 3, 5};
constexpr std::size_t kElems = 15, kTrain = 211, kTest = 17;
constexpr int kClasses = 7;

std::string fixture_path() {
  const char* dir = std::getenv("RINGTRAIN_TEST_DATA_DIR");
  static const std::string path =
      fmt::format("{}/dataset-read-np{}.h5", dir ? dir : ".", test::topology().world_size());
  return path;
}

// A control channel per open (collective, like the open), gone before MPI is.
Dataset open_on_all_ranks(const std::string& split) {
  const std::unique_ptr<Communicator> control = make_control_communicator(test::topology());
  return Dataset::open_on_all_ranks(fixture_path(), split, *control);
}

// Rank 0 writes the file once; everyone opens it.
Dataset open_fixture(const std::string& split) {
  static bool written = false;
  if (!written) {
    if (test::topology().rank() == 0)
      test::write_good_dataset(fixture_path(), kTrain, kTest, kShape, kClasses);
    MPI_Barrier(MPI_COMM_WORLD);
    written = true;
  }
  return open_on_all_ranks(split);
}

float expected(std::uint64_t i, std::size_t e) {
  return static_cast<float>(test::sample_byte(i, e)) * (1.0f / 255.0f) + -0.5f;
}

void check_rows(std::span<const std::uint64_t> idx, const float* x, const std::int32_t* y) {
  for (std::size_t k = 0; k < idx.size(); ++k) {
    CAPTURE(k, idx[k]);
    REQUIRE(y[k] == test::sample_label(idx[k], kClasses));
    for (std::size_t e = 0; e < kElems; ++e) REQUIRE(x[k * kElems + e] == expected(idx[k], e));
  }
}

}  // namespace

TEST_CASE("open reads shape, classes, attributes and labels") {
  Dataset ds = open_fixture("train");
  CHECK(ds.size() == kTrain);
  CHECK(ds.sample_shape() == kShape);
  CHECK(ds.sample_elements() == kElems);
  CHECK(ds.num_classes() == kClasses);
  CHECK(ds.stored_dtype() == SampleDType::u8);
  CHECK(ds.scale() == 1.0f / 255.0f);
  CHECK(ds.offset() == -0.5f);
  for (std::size_t i = 0; i < kTrain; ++i)
    REQUIRE(ds.labels()[i] == test::sample_label(i, kClasses));
  CHECK(open_fixture("test").size() == kTest);
  CHECK_NOTHROW(ds.check_sample_shape({1, 3, 5}));
}

TEST_CASE(
    "read: any order, repeats and runs, with and without the cache, restore the order asked for") {
  const bool hdf5_path = GENERATE(false, true);
  CAPTURE(hdf5_path);
  Dataset ds = open_fixture("train");
  CHECK(ds.direct_reads());  // contiguous, unfiltered uint8
  if (hdf5_path) ds.use_hdf5_reads();
  CHECK(ds.direct_reads() == !hdf5_path);
  const auto rank = static_cast<std::uint64_t>(test::topology().rank());
  const std::vector<std::vector<std::uint64_t>> cases = {
      {},
      {0},
      {kTrain - 1},
      {5 + rank, 4 + rank, 3 + rank, 100, 101, 102, 103, 7, 7, 0,
       kTrain - 1},  // runs, repeats, reversed
      {42, 42, 42},
  };
  std::vector<std::uint64_t> all(kTrain);
  for (std::size_t i = 0; i < kTrain; ++i) all[i] = (i * 97 + rank * 13) % kTrain;  // a permutation
  for (int pass = 0; pass < 2; ++pass) {
    if (pass == 1) REQUIRE(ds.enable_cache());
    CHECK(ds.cached() == (pass == 1));
    for (const auto& idx : cases) {
      std::vector<float> x(idx.size() * kElems, -9.0f);
      std::vector<std::int32_t> y(idx.size(), -1);
      ds.read(idx, x.data(), y.data());
      check_rows(idx, x.data(), y.data());
    }
    std::vector<float> x(kTrain * kElems);
    std::vector<std::int32_t> y(kTrain);
    ds.read(all, x.data(), y.data());
    check_rows(all, x.data(), y.data());
    const std::vector<std::uint64_t> bad = {3, kTrain};
    CHECK_THROWS_WITH(ds.read(bad, x.data(), y.data()),
                      Catch::Contains("sample index 211 out of range"));
  }
  CHECK_FALSE(open_fixture("train").enable_cache(100));  // a budget too small: stays off
}

TEST_CASE("prefetcher: batches in cursor order, rolling over epochs, equal to direct reads") {
  Dataset ds = open_fixture("train");
  const Topology& t = test::topology();
  for (std::size_t depth : {std::size_t{1}, std::size_t{2}, std::size_t{4}}) {
    CAPTURE(depth);
    const ShardedSampler sampler(ds.size(), 9, t.rank(), t.world_size(), 5);
    const std::size_t steps = sampler.steps_per_epoch();
    DataCursor c{2, steps - 2};
    Prefetcher p(ds, sampler, c, depth);
    for (int k = 0; k < static_cast<int>(steps) + 3; ++k) {
      const Batch b = p.next();
      CHECK(b.cursor == c);
      REQUIRE(b.size == 9);
      REQUIRE(b.x.count == 9 * kElems);
      REQUIRE(b.x.device.is_cpu());
      CHECK(b.wait_seconds >= 0);
      const auto idx = sampler.rank_indices(c);
      check_rows(idx, b.x.as<float>(), b.y.as<std::int32_t>());
      c = sampler.next(c);
    }
    CHECK(c == DataCursor{4, 1});
  }
  // A checkpoint written after an epoch's last step resumes at the next epoch.
  const ShardedSampler sampler(ds.size(), 4, t.rank(), t.world_size(), 5);
  Prefetcher p(ds, sampler, {0, sampler.steps_per_epoch()}, 2);
  CHECK(p.next().cursor == DataCursor{1, 0});
  CHECK_THROWS_WITH(Prefetcher(ds, ShardedSampler(10, 1, 0, 1, 0), {}, 2),
                    Catch::Contains("N = 10"));
}

TEST_CASE("evaluation batches cover this rank's shard in order; all ranks cover 0..N-1 once") {
  Dataset ds = open_fixture("test");
  const Topology& t = test::topology();
  for (std::size_t batch : {std::size_t{1}, std::size_t{4}, std::size_t{100}}) {
    CAPTURE(batch);
    const EvalShard shard = eval_shard(ds.size(), t.rank(), t.world_size());
    EvalBatches eval(ds, shard, batch);
    CHECK(eval.num_batches() == (shard.size() + batch - 1) / batch);
    std::uint64_t next = shard.begin;
    std::size_t batches = 0;
    while (auto b = eval.next()) {
      REQUIRE(b->size >= 1);
      REQUIRE(b->size <= batch);
      std::vector<std::uint64_t> idx(b->size);
      for (std::size_t k = 0; k < b->size; ++k) idx[k] = next + k;
      check_rows(idx, b->x.as<float>(), b->y.as<std::int32_t>());
      next += b->size;
      ++batches;
    }
    CHECK(!eval.next());  // stays at the end
    CHECK(next == shard.end);
    CHECK(batches == eval.num_batches());
    long long seen = static_cast<long long>(shard.size()), total = 0;
    MPI_Allreduce(&seen, &total, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
    CHECK(total == static_cast<long long>(kTest));
  }
}

TEST_CASE("a failure on one rank's open is reported on every rank") {
  const Topology& t = test::topology();
  // Only the last rank asks for a missing split; everyone must throw.
  const std::string split = t.rank() == t.world_size() - 1 ? "val" : "train";
  open_fixture("train");
  if (t.world_size() == 1) {
    CHECK_THROWS_WITH(open_on_all_ranks(split), Catch::Contains("no split /val"));
  } else if (t.rank() == t.world_size() - 1) {
    CHECK_THROWS_WITH(open_on_all_ranks(split), Catch::Contains("no split /val"));
  } else {
    // The failing rank's own reason, not this rank's path: its message may
    // never reach the log when the launcher ends the job first.
    CHECK_THROWS_WITH(open_on_all_ranks(split),
                      Catch::Contains(fmt::format("rank {} could not open", t.world_size() - 1)) &&
                          Catch::Contains("no split /val"));
  }
}
