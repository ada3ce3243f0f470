#include <catch2/catch.hpp>

#include "ringtrain/core/error.h"
#include "ringtrain/sync/bucket_plan.h"

using namespace ringtrain;

namespace {
// Layers: 0 (100 params), 1 (none, e.g. ReLU), 2 (300), 3 (50), 4 (7).
std::vector<std::pair<std::size_t, std::size_t>> layers() {
  return {{0, 100}, {100, 0}, {100, 300}, {400, 50}, {450, 7}};
}
}  // namespace

TEST_CASE("buckets cover the buffer in reverse layer order within the cap") {
  BucketPlan plan(layers(), 4, 4 * 340);  // cap 340 elements
  const auto& b = plan.buckets();
  REQUIRE(b.size() == 3);
  // Last layers first: {4,3} = 57 elements; adding layer 2 would make 357 > 340,
  // so layer 2 (300) is a bucket of its own; then layer 0 (100; 400 > 340).
  CHECK(b[0].offset == 400);
  CHECK(b[0].count == 57);
  CHECK(b[0].first_layer == 3);
  CHECK(b[0].last_layer == 4);
  CHECK(b[1].offset == 100);
  CHECK(b[1].count == 300);
  CHECK(b[2].offset == 0);
  CHECK(b[2].count == 100);
  std::size_t total = 0;
  for (const auto& k : b) total += k.count;
  CHECK(total == 457);
  CHECK(plan.bucket_completed_by(3) == 0);
  CHECK(plan.bucket_completed_by(4) == -1);
  CHECK(plan.bucket_completed_by(2) == 1);
  CHECK(plan.bucket_completed_by(0) == 2);
  CHECK(plan.bucket_completed_by(1) == -1);
}

TEST_CASE("cap 0 makes one bucket; a tiny cap gives one bucket per layer") {
  BucketPlan one(layers(), 4, 0);
  REQUIRE(one.buckets().size() == 1);
  CHECK(one.buckets()[0].count == 457);
  CHECK(one.bucket_completed_by(0) == 0);
  BucketPlan per_layer(layers(), 4, 4);
  CHECK(per_layer.buckets().size() == 4);
}

TEST_CASE("non-contiguous layers are rejected") {
  CHECK_THROWS_AS(BucketPlan({{0, 10}, {12, 5}}, 4, 0), Error);
}
