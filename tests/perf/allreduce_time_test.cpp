#include <catch2/catch.hpp>

#include "ringtrain/core/error.h"
#include "ringtrain/perf/allreduce_time.h"

using namespace ringtrain;

TEST_CASE("all-reduce time: ring and hierarchical formulas") {
  LinkTiers m;
  m.intra = {10e-6, 1e-9};
  m.inter = {100e-6, 1e-8};
  const double n = 1e5;
  // One rank: nothing to do.
  CHECK(allreduce_seconds(n, {1, 1}, AllreduceAlgorithm::ring, m) == 0);
  // One node, 4 ranks: intra link, 2*3*(10us + 25000*1ns) = 210us.
  CHECK(allreduce_seconds(n, {1, 4}, AllreduceAlgorithm::ring, m) == Approx(210e-6));
  // 2 nodes x 2 ranks, flat ring: every step waits on the inter link,
  // 2*3*(100us + 25000*10ns) = 2100us.
  CHECK(allreduce_seconds(n, {2, 2}, AllreduceAlgorithm::ring, m) == Approx(2100e-6));
  // Hierarchical: 2*(10us + 50000*1ns) + 2*(100us + 25000*10ns) = 120us + 700us.
  CHECK(allreduce_seconds(n, {2, 2}, AllreduceAlgorithm::hierarchical, m) == Approx(820e-6));
  CHECK(parse_allreduce_algorithm("hierarchical") == AllreduceAlgorithm::hierarchical);
  CHECK_THROWS_AS(parse_allreduce_algorithm("tree"), Error);
}

TEST_CASE("bucket suggestion: latency within 5% of the transfer time") {
  LinkTiers m;
  m.inter = {100e-6, 1e-8};
  // 2 nodes x 1 rank: latency 2*100us, transfer n*1e-8 s: n >= 200us / (0.05 * 1e-8).
  const double b = suggest_bucket_bytes({2, 1}, AllreduceAlgorithm::ring, m);
  CHECK(b == Approx(4e5));
  const double latency = allreduce_seconds(0, {2, 1}, AllreduceAlgorithm::ring, m);
  CHECK(latency ==
        Approx(0.05 * (allreduce_seconds(b, {2, 1}, AllreduceAlgorithm::ring, m) - latency)));
  CHECK(suggest_bucket_bytes({1, 1}, AllreduceAlgorithm::ring, m) == 0);
}
