// The sharding of DESIGN.md "Sharding". Each epoch has one global permutation
// of 0..N-1, a pure function of (seed, epoch), identical on every rank. Global
// step s covers permutation positions [s*G, (s+1)*G), G = B * world; rank r
// takes the contiguous slice [s*G + r*B, s*G + (r+1)*B). The incomplete last
// window is dropped, so no sample repeats within an epoch and every rank runs
// floor(N/G) steps.
//
//   permutation  | p0 p1 p2 p3 p4 p5 | p6 p7 p8 p9 pA pB | pC pD |
//   global step  |       s = 0       |       s = 1       | drop  |
//   rank (B = 2) | r0 r0 r1 r1 r2 r2 | r0 r0 r1 r1 r2 r2 |       |
//
// With a fixed global batch (--global-batch), G is given and does not depend
// on the world size: rank r takes the r-th of `world` contiguous pieces of the
// window, of floor(G/world) or ceil(G/world) samples (the first G % world
// ranks get one more), tiled like the evaluation ranges below.
//
// Evaluation instead splits 0..N-1 into `world` contiguous ranges (no drop, no
// padding); metrics are summed with an all-reduce.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace ringtrain {

// The data position that goes into a checkpoint: the next global step to run.
struct DataCursor {
  std::uint64_t epoch = 0;
  std::uint64_t step = 0;
  bool operator==(const DataCursor&) const = default;
};

class ShardedSampler {
 public:
  // Throws Error when N < G (no full global batch), B == 0, or rank/world are bad.
  ShardedSampler(std::size_t n, std::size_t batch_per_rank, int rank, int world,
                 std::uint64_t seed);
  // A global batch of G samples per step split over the ranks (see above).
  // Throws Error when N < G or G < world (a rank would get no sample).
  static ShardedSampler split_global(std::size_t n, std::size_t global_batch, int rank, int world,
                                     std::uint64_t seed);
  ShardedSampler(const ShardedSampler& other);
  ShardedSampler& operator=(const ShardedSampler&) = delete;

  std::size_t size() const { return n_; }
  // This rank's samples per step (ranks may differ by one with split_global).
  std::size_t batch_per_rank() const { return batch_; }
  // The largest batch_per_rank() of any rank: what buffers must hold.
  std::size_t max_batch_per_rank() const { return (global_ + world_ - 1) / world_; }
  std::size_t global_batch() const { return global_; }
  std::size_t steps_per_epoch() const { return n_ / global_batch(); }
  std::size_t dropped_per_epoch() const { return n_ - steps_per_epoch() * global_batch(); }
  int rank() const { return rank_; }
  int world() const { return world_; }
  std::uint64_t seed() const { return seed_; }

  // The same on every rank for the same (seed, epoch).
  std::vector<std::uint64_t> permutation(std::uint64_t epoch) const;
  // This rank's B indices of global step c.step of epoch c.epoch. Throws Error
  // when c.step >= steps_per_epoch().
  std::vector<std::uint64_t> rank_indices(DataCursor c) const;
  // The cursor after c, rolling over to step 0 of the next epoch.
  DataCursor next(DataCursor c) const;
  // A cursor whose step is at (or past) the end of its epoch becomes step 0 of
  // the next epoch (a checkpoint written after an epoch's last step).
  DataCursor normalize(DataCursor c) const;

  // One line for the start-up log: N, B, world, G, steps and the number of
  // samples each epoch drops.
  std::string describe() const;

  // Resume with another world size: the cursor at the same global sample
  // position (step * old G). Error if that position is not a multiple of new G.
  static DataCursor convert_cursor(DataCursor c, std::size_t old_global_batch,
                                   std::size_t new_global_batch);

 private:
  std::size_t n_, batch_;
  int rank_, world_;
  std::size_t global_ = 0, offset_ = 0;  // samples per step; this rank's start in a step
  std::uint64_t seed_;
  // The last permutation made: every step of an epoch reuses it.
  mutable std::mutex cache_mutex_;
  mutable std::uint64_t cached_epoch_ = 0;
  mutable std::shared_ptr<const std::vector<std::uint64_t>> cached_;
};

// Rank r's contiguous range of the evaluation set: the ranges of ranks
// 0..world-1 tile [0, n) in order; sizes differ by at most one; a range may be
// empty when n < world.
struct EvalShard {
  std::uint64_t begin = 0, end = 0;
  std::size_t size() const { return static_cast<std::size_t>(end - begin); }
};
EvalShard eval_shard(std::size_t n, int rank, int world);

}  // namespace ringtrain
