// The sync layer (bucket plan, gradient synchronisation, run agreement) under
// mpirun (np 1-4), on a real CPU backend: buckets are
// launched in plan order as backward reports layers ready, the gradient buffer
// ends as the average over ranks, accumulation steps exchange nothing, and the
// start-up agreement and the replica check name the field, the ranks and the
// step that differ.
#include <catch2/catch.hpp>

#include <cmath>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "ringtrain/comm/communicator.h"
#include "ringtrain/core/error.h"
#include "ringtrain/sync/bucket_plan.h"
#include "ringtrain/sync/gradient_sync.h"
#include "ringtrain/sync/run_agreement.h"
#include "tests/support/mpi_test.h"

using namespace ringtrain;
using Catch::Matchers::Contains;

namespace {

// 5 layers, the middle one without parameters; 4-byte elements.
const std::vector<std::pair<std::size_t, std::size_t>> kLayers = {
    {0, 37}, {37, 100}, {137, 0}, {137, 64}, {201, 9}};
constexpr std::size_t kTotal = 210;

float gradient_of(int rank, std::size_t i) {
  return static_cast<float>(rank + 1) * 0.5f + static_cast<float>(i % 13);
}

void fill(BufferView grads, int rank) {
  auto* g = static_cast<float*>(grads.ptr);
  for (std::size_t i = 0; i < grads.count; ++i) g[i] = gradient_of(rank, i);
}

std::size_t wrong_average(BufferView grads, int size) {
  const auto* g = static_cast<const float*>(grads.ptr);
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < grads.count; ++i) {
    double sum = 0;
    for (int r = 0; r < size; ++r) sum += gradient_of(r, i);
    wrong += std::abs(g[i] - sum / size) > 1e-5 * (1.0 + std::abs(sum / size));
  }
  return wrong;
}

}  // namespace

TEST_CASE(
    "buckets start in backward order as their last layer is ready; the buffer ends averaged") {
  auto comm = make_communicator("shm", test::topology());
  BufferView grads = comm->allocate(kTotal, DType::f32);
  // A 300-byte cap: several buckets over the 5 layers.
  BucketPlan plan(kLayers, sizeof(float), 300);
  REQUIRE(plan.buckets().size() > 2);
  GradientSynchronizer sync(*comm, plan, grads, /*overlap=*/true);
  for (int step = 0; step < 3; ++step) {
    fill(grads, comm->rank());
    sync.begin_step(/*sync=*/true);
    std::size_t launched = 0;
    for (std::size_t layer = kLayers.size(); layer-- > 0;) {
      sync.on_layer_ready(layer);
      if (comm->size() > 1 && plan.bucket_completed_by(layer) >= 0) ++launched;
      // Nothing is launched before its last layer is ready, everything is then.
      CHECK(sync.timings().size() == launched);
    }
    sync.finish();
    // Plan order is backward order, the same on every rank.
    for (std::size_t k = 0; k < sync.timings().size(); ++k) CHECK(sync.timings()[k].bucket == k);
    // Every bucket's ready time, on one rank too, in backward order.
    REQUIRE(sync.ready().size() == plan.buckets().size());
    for (std::size_t k = 0; k < sync.ready().size(); ++k) {
      CHECK(sync.ready()[k].bucket == k);
      if (k > 0) CHECK(sync.ready()[k].ready_s >= sync.ready()[k - 1].ready_s);
    }
    CHECK(wrong_average(grads, comm->size()) == 0);
  }
}

TEST_CASE("without overlap every bucket starts at finish(); accumulation steps exchange nothing") {
  auto comm = make_communicator("ring", test::topology());
  BufferView grads = comm->allocate(kTotal, DType::f32);
  BucketPlan plan(kLayers, sizeof(float), 300);
  GradientSynchronizer sync(*comm, plan, grads, /*overlap=*/false);
  fill(grads, comm->rank());
  sync.begin_step(/*sync=*/false);  // an accumulation micro-step
  for (std::size_t layer = kLayers.size(); layer-- > 0;) sync.on_layer_ready(layer);
  sync.finish();
  CHECK(sync.timings().empty());
  CHECK(sync.ready().empty());  // nothing is synced on this micro-step
  // Still this rank's own values.
  const auto* g = static_cast<const float*>(grads.ptr);
  CHECK(g[5] == gradient_of(comm->rank(), 5));
  sync.begin_step(/*sync=*/true);
  for (std::size_t layer = kLayers.size(); layer-- > 0;) {
    sync.on_layer_ready(layer);
    CHECK(sync.timings().empty());
  }
  sync.finish();
  CHECK(sync.timings().size() == (comm->size() > 1 ? plan.buckets().size() : 0u));
  CHECK(sync.ready().size() == plan.buckets().size());
  CHECK(wrong_average(grads, comm->size()) == 0);
}

TEST_CASE("the start-up agreement names the field and the ranks that differ") {
  auto comm = make_communicator("mpi", test::topology());
  const int last = comm->size() - 1;
  agree_on_signature(*comm, {{"model spec hash", 42}, {"batch", 64}});  // all equal: no error
  if (comm->size() == 1) return;
  const std::uint64_t batch = comm->rank() == last ? 32 : 64;
  // Every rank learns it, so every rank fails (nobody waits for a peer that left).
  CHECK_THROWS_WITH(
      agree_on_signature(*comm, {{"model spec hash", 42}, {"batch", batch}}),
      Contains("'batch'") && Contains("32") && Contains("64") && Contains(std::to_string(last)));
}

TEST_CASE("a mismatch prints each rank's value in its own form") {
  auto comm = make_communicator("mpi", test::topology());
  if (comm->size() == 1) return;
  const int last = comm->size() - 1;
  const bool odd = comm->rank() == last;
  std::string others = last == 1 ? "rank 0" : "ranks 0";
  for (int q = 1; q < last; ++q) others += fmt::format(",{}", q);
  // Several fields differ at once, of every kind, and one field agrees.
  const std::vector<SignatureField> fields = {
      signature_real("--lr", odd ? 0.1f : 0.05f),
      signature_number("--max-steps", 4),
      signature_text("--schedule", odd ? "cosine" : "constant"),
      signature_bool("--no-overlap", odd),
  };
  CHECK_THROWS_WITH(
      agree_on_signature(*comm, fields),
      Contains("'--lr' is 0.05 on " + others + ", but 0.1 on rank " + std::to_string(last)) &&
          Contains("'--schedule' is constant on " + others + ", but cosine on rank " +
                   std::to_string(last)) &&
          Contains("'--no-overlap' is off on " + others + ", but on on rank " +
                   std::to_string(last)) &&
          !Contains("--max-steps"));
}

TEST_CASE("the replica check names the diverged ranks and the step") {
  auto comm = make_communicator("mpi", test::topology());
  check_replicas(*comm, 0x1234, 7);  // equal: no error
  if (comm->size() == 1) return;
  const int last = comm->size() - 1;
  const std::uint64_t hash = comm->rank() == last ? 0x9999 : 0x1234;
  CHECK_THROWS_WITH(check_replicas(*comm, hash, 11),
                    Contains("11") && Contains(std::to_string(last)));
}
