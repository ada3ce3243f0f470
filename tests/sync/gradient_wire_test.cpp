// --grad-dtype and --zero 1 in the sync layer, under mpirun (np 1-4) on every
// CPU backend: buckets reduced in bf16 or fp16 land within the 16-bit bound
// of the f32 average (or sum, for --global-batch) with half the bytes; ZeRO's
// reduce-scatter leaves each rank exactly its blocks of the average; and a
// ShardedOptimizer gives the parameters and the (gathered) state of the
// ordinary optimizer, for SGD with momentum and AdamW, on a buffer whose
// buckets no world size divides.
#include <catch2/catch.hpp>

#include <cmath>
#include <string>
#include <vector>

#include "ringtrain/comm/communicator.h"
#include "ringtrain/optim/optimizer.h"
#include "ringtrain/sync/bucket_plan.h"
#include "ringtrain/sync/gradient_sync.h"
#include "ringtrain/sync/gradient_wire.h"
#include "ringtrain/sync/sharded_optimizer.h"
#include "ringtrain/sync/zero_layout.h"
#include "tests/support/mpi_test.h"

using namespace ringtrain;

namespace {

// 5 layers, the middle one without parameters: 211 elements, odd buckets.
const std::vector<std::pair<std::size_t, std::size_t>> kLayers = {
    {0, 37}, {37, 101}, {138, 0}, {138, 64}, {202, 9}};
constexpr std::size_t kTotal = 211;

// Depends on rank, index and step; signs and magnitudes vary. The sign
// depends on the element only, so no average is near 0, where AdamW's
// m / sqrt(v) would turn a last-bit difference in the sum into a large one.
float gradient_of(int rank, std::size_t i, int step = 0) {
  const float sign = (i * 7 + static_cast<std::size_t>(step)) % 3 == 0 ? -1.f : 1.f;
  return sign * (0.37f * static_cast<float>(rank + 1) + 0.013f * static_cast<float>(i % 29) +
                 0.11f * static_cast<float>(step));
}

void fill(BufferView grads, int rank, int step = 0) {
  auto* g = grads.as<float>();
  for (std::size_t i = 0; i < grads.count; ++i) g[i] = gradient_of(rank, i, step);
}

void run_backward(GradientSynchronizer& sync) {
  sync.begin_step(true);
  for (std::size_t layer = kLayers.size(); layer-- > 0;) sync.on_layer_ready(layer);
  sync.finish();
}

// The 16-bit bound: each rank's scaled term is rounded once (relative eps),
// the f32 sum of the terms is rounded once more into 16 bits.
double wire_eps(DType wire) {
  return wire == DType::bf16 ? std::ldexp(1.0, -8) : std::ldexp(1.0, -11);
}

}  // namespace

TEST_CASE("bf16 and fp16 on the wire: within the 16-bit bound of f32, half the bytes") {
  const auto& topo = test::topology();
  for (const char* backend : {"shm", "ring", "mpi"}) {
    auto comm = make_communicator(backend, topo);
    const int world = comm->size();
    for (ReduceOp op : {ReduceOp::avg, ReduceOp::sum}) {
      std::size_t f32_bytes = 0;
      for (DType wire : {DType::f32, DType::bf16, DType::f16}) {
        INFO(backend << " " << reduce_op_name(op) << " " << dtype_name(wire) << " world " << world);
        BufferView grads = comm->allocate(kTotal, DType::f32);
        GradientSynchronizer sync(*comm, BucketPlan(kLayers, sizeof(float), 300), grads,
                                  /*overlap=*/true, nullptr, op);
        sync.configure(wire, nullptr);
        CHECK(sync.wire_dtype() == wire);
        fill(grads, comm->rank());
        run_backward(sync);
        std::size_t wrong = 0;
        for (std::size_t i = 0; i < kTotal; ++i) {
          double exact = 0, magnitude = 0;
          for (int r = 0; r < world; ++r) {
            exact += gradient_of(r, i);
            magnitude += std::abs(gradient_of(r, i));
          }
          if (op == ReduceOp::avg) {
            exact /= world;
            magnitude /= world;
          }
          const double bound = wire == DType::f32
                                   ? 1e-6 * (1 + magnitude)
                                   : wire_eps(wire) * (magnitude + std::abs(exact)) + 1e-7;
          if (world == 1) {
            // One rank exchanges nothing: the gradients are untouched.
            wrong += grads.as<float>()[i] != gradient_of(0, i);
          } else {
            wrong += std::abs(grads.as<float>()[i] - exact) > bound;
          }
        }
        CHECK(wrong == 0);
        if (world == 1) {
          CHECK(sync.wire_bytes() == 0);
        } else if (wire == DType::f32) {
          f32_bytes = sync.wire_bytes();
          CHECK(f32_bytes == kTotal * sizeof(float));
        } else {
          CHECK(sync.wire_bytes() * 2 == f32_bytes);
        }
      }
    }
  }
}

TEST_CASE("the ZeRO layout cuts every bucket into equal blocks, padded, owned once") {
  const BucketPlan plan(kLayers, sizeof(float), 300);
  for (int world = 1; world <= 5; ++world) {
    std::vector<int> owners(kTotal, 0);
    std::size_t shard = 0;
    for (int rank = 0; rank < world; ++rank) {
      const ZeroLayout layout(plan, world, rank);
      if (rank == 0) shard = layout.shard_count();
      CHECK(layout.shard_count() == shard);  // the same size on every rank
      CHECK(layout.padded_count() == shard * static_cast<std::size_t>(world));
      for (const ZeroBlock& z : layout.blocks()) {
        CHECK(z.block * static_cast<std::size_t>(world) >= z.bucket_count);
        CHECK(z.block * static_cast<std::size_t>(world) < z.bucket_count + world);
        for (std::size_t i = 0; i < z.own_count; ++i) ++owners[z.own_offset + i];
      }
    }
    for (std::size_t i = 0; i < kTotal; ++i) CHECK(owners[i] == 1);
  }
}

TEST_CASE("ZeRO: each rank's shard holds exactly its blocks of the average") {
  const auto& topo = test::topology();
  for (const char* backend : {"shm", "ring", "mpi"}) {
    auto comm = make_communicator(backend, topo);
    const int world = comm->size();
    for (DType wire : {DType::f32, DType::bf16}) {
      INFO(backend << " " << dtype_name(wire) << " world " << world);
      const BucketPlan plan(kLayers, sizeof(float), 300);
      const ZeroLayout layout(plan, world, comm->rank());
      BufferView grads = comm->allocate(kTotal, DType::f32);
      GradientSynchronizer sync(*comm, plan, grads, /*overlap=*/true);
      sync.configure(wire, &layout);
      REQUIRE(sync.shard_gradients().count == layout.shard_count());
      for (int step = 0; step < 2; ++step) {
        fill(grads, comm->rank(), step);
        run_backward(sync);
        const float* shard = sync.shard_gradients().as<const float>();
        std::size_t wrong = 0;
        for (const ZeroBlock& z : layout.blocks()) {
          for (std::size_t k = 0; k < z.block; ++k) {
            if (k >= z.own_count) {  // padding adds nothing
              wrong += shard[z.shard_offset + k] != 0.f;
              continue;
            }
            const std::size_t i = z.own_offset + k;
            double exact = 0, magnitude = 0;
            for (int r = 0; r < world; ++r) {
              exact += gradient_of(r, i, step);
              magnitude += std::abs(gradient_of(r, i, step));
            }
            exact /= world;
            magnitude /= world;
            const double bound = wire == DType::f32
                                     ? 1e-6 * (1 + magnitude)
                                     : wire_eps(wire) * (magnitude + std::abs(exact)) + 1e-7;
            wrong += std::abs(shard[z.shard_offset + k] - exact) > bound;
          }
        }
        CHECK(wrong == 0);
      }
    }
  }
}

TEST_CASE("ZeRO-1 steps give the ordinary optimizer's parameters and state") {
  const auto& topo = test::topology();
  auto comm = make_communicator("shm", topo);
  const int world = comm->size();
  OptimizerConfig sgd;
  sgd.kind = "sgd";
  sgd.momentum = 0.9f;
  sgd.weight_decay = 0.01f;
  OptimizerConfig adamw;
  adamw.kind = "adamw";
  adamw.weight_decay = 0.05f;
  for (const OptimizerConfig& config : {sgd, adamw}) {
    for (bool masked : {false, true}) {
      INFO(config.kind << " world " << world << (masked ? " with a decay mask" : ""));
      const BucketPlan plan(kLayers, sizeof(float), 300);
      const ZeroLayout layout(plan, world, comm->rank());
      BufferView grads = comm->allocate(kTotal, DType::f32);
      GradientSynchronizer sync(*comm, plan, grads, /*overlap=*/true);
      sync.configure(DType::f32, &layout);
      ShardedOptimizer sharded(config, layout, *comm, sync.shard_gradients(), Device::cpu(),
                               nullptr);
      auto plain = make_optimizer(config, kTotal, Device::cpu());
      std::vector<float> mask(kTotal);
      for (std::size_t i = 0; i < kTotal; ++i) mask[i] = i % 5 == 0 || i > 200 ? 0.f : 1.f;
      if (masked) {
        sharded.set_decay_mask(view_of(mask.data(), kTotal));
        plain->set_decay_mask(view_of(mask.data(), kTotal));
      }
      std::vector<float> params(kTotal), reference(kTotal), average(kTotal);
      for (std::size_t i = 0; i < kTotal; ++i)
        params[i] = reference[i] = 0.5f - 0.01f * static_cast<float>(i % 37);
      sharded.load_master(view_of(params.data(), kTotal));
      for (int step = 0; step < 3; ++step) {
        fill(grads, comm->rank(), step);
        for (std::size_t i = 0; i < kTotal; ++i) {
          double sum = 0;
          for (int r = 0; r < world; ++r) sum += gradient_of(r, i, step);
          average[i] = static_cast<float>(sum / world);
        }
        run_backward(sync);
        sharded.step(view_of(params.data(), kTotal), grads, 0.1f);
        plain->step(view_of(reference.data(), kTotal), view_of(average.data(), kTotal), 0.1f);
      }
      std::size_t wrong = 0;
      for (std::size_t i = 0; i < kTotal; ++i)
        wrong += std::abs(params[i] - reference[i]) > 1e-5f * (1.f + std::abs(reference[i]));
      CHECK(wrong == 0);
      CHECK(sharded.step_count() == 3);
      // The gathered state is the ordinary optimizer's, by name.
      sharded.gather_state();
      const auto full = sharded.state();
      const auto expected = plain->state();
      REQUIRE(full.size() == expected.size());
      for (std::size_t s = 0; s < full.size(); ++s) {
        CHECK(full[s].name == expected[s].name);
        REQUIRE(full[s].view.count == kTotal);
        std::size_t differ = 0;
        for (std::size_t i = 0; i < kTotal; ++i) {
          const float a = full[s].view.as<float>()[i], b = expected[s].view.as<float>()[i];
          differ += std::abs(a - b) > 1e-5f * (1.f + std::abs(b));
        }
        CHECK(differ == 0);
      }
      // Shards hold about 1/world of the state.
      CHECK(sharded.state_bytes() * static_cast<std::size_t>(world) <=
            plain->state_bytes() + full.size() * plan.buckets().size() * world * sizeof(float));
      // A round trip through the full copies (a resume) keeps the shard.
      sharded.scatter_state();
      sharded.gather_state();
      const auto again = sharded.state();
      for (std::size_t s = 0; s < again.size(); ++s)
        for (std::size_t i = 0; i < kTotal; i += 17)
          CHECK(again[s].view.as<float>()[i] ==
                Approx(expected[s].view.as<float>()[i]).epsilon(1e-5));
      sharded.release_full_state();
    }
  }
}
