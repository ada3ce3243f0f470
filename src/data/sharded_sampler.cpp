#include "ringtrain/data/sharded_sampler.h"

#include <numeric>

#include "data/random.h"
#include "ringtrain/core/check.h"

namespace ringtrain {

ShardedSampler::ShardedSampler(std::size_t n, std::size_t batch_per_rank, int rank, int world,
                               std::uint64_t seed)
    : n_(n), batch_(batch_per_rank), rank_(rank), world_(world), seed_(seed) {
  RT_CHECK(world >= 1, "sampler: world size must be >= 1, got {}", world);
  RT_CHECK(rank >= 0 && rank < world, "sampler: rank {} outside [0, {})", rank, world);
  RT_CHECK(batch_per_rank >= 1, "sampler: --batch (per rank) must be >= 1, got {}", batch_per_rank);
  global_ = batch_per_rank * static_cast<std::size_t>(world);
  offset_ = batch_per_rank * static_cast<std::size_t>(rank);
  RT_CHECK(n >= global_batch(),
           "sampler: the dataset has N = {} samples, fewer than one global batch G = {} (--batch "
           "{} per rank x {} ranks): lower --batch or use fewer ranks",
           n, global_batch(), batch_per_rank, world);
}

ShardedSampler ShardedSampler::split_global(std::size_t n, std::size_t global_batch, int rank,
                                            int world, std::uint64_t seed) {
  RT_CHECK(world >= 1, "sampler: world size must be >= 1, got {}", world);
  RT_CHECK(global_batch >= static_cast<std::size_t>(world),
           "sampler: a global batch of {} samples per micro-step cannot give each of {} ranks a "
           "sample: raise --global-batch or use fewer ranks",
           global_batch, world);
  RT_CHECK(n >= global_batch,
           "sampler: the dataset has N = {} samples, fewer than one global batch G = {} "
           "(--global-batch): lower it",
           n, global_batch);
  const EvalShard piece = eval_shard(global_batch, rank, world);
  ShardedSampler s(n, 1, rank, world, seed);  // n >= G >= world: the checks hold
  s.batch_ = piece.size();
  s.global_ = global_batch;
  s.offset_ = static_cast<std::size_t>(piece.begin);
  return s;
}

ShardedSampler::ShardedSampler(const ShardedSampler& o)
    : n_(o.n_),
      batch_(o.batch_),
      rank_(o.rank_),
      world_(o.world_),
      global_(o.global_),
      offset_(o.offset_),
      seed_(o.seed_) {}

std::vector<std::uint64_t> ShardedSampler::permutation(std::uint64_t epoch) const {
  std::vector<std::uint64_t> p(n_);
  std::iota(p.begin(), p.end(), std::uint64_t{0});
  // Fisher-Yates from the back, with a stream keyed by (seed, epoch).
  data_random::Xoshiro256 rng(seed_, epoch);
  for (std::size_t i = n_; i > 1; --i) {
    const std::size_t j = static_cast<std::size_t>(rng.below(i));
    std::swap(p[i - 1], p[j]);
  }
  return p;
}

std::vector<std::uint64_t> ShardedSampler::rank_indices(DataCursor c) const {
  RT_CHECK(c.step < steps_per_epoch(),
           "sampler: step {} of epoch {} is past the end of the epoch ({} steps of G = {})", c.step,
           c.epoch, steps_per_epoch(), global_batch());
  std::shared_ptr<const std::vector<std::uint64_t>> perm;
  {
    std::lock_guard lock(cache_mutex_);
    if (!cached_ || cached_epoch_ != c.epoch) {
      cached_ = std::make_shared<const std::vector<std::uint64_t>>(permutation(c.epoch));
      cached_epoch_ = c.epoch;
    }
    perm = cached_;
  }
  const std::size_t begin = c.step * global_batch() + offset_;
  return {perm->begin() + static_cast<std::ptrdiff_t>(begin),
          perm->begin() + static_cast<std::ptrdiff_t>(begin + batch_)};
}

DataCursor ShardedSampler::next(DataCursor c) const {
  return normalize({c.epoch, c.step + 1});
}

DataCursor ShardedSampler::normalize(DataCursor c) const {
  if (c.step >= steps_per_epoch()) return {c.epoch + 1, 0};
  return c;
}

std::string ShardedSampler::describe() const {
  return fmt::format(
      "data: N = {}, batch {} on rank {} ({} at most) x {} ranks = global batch {}, {} steps per "
      "epoch, {} sample(s) dropped per epoch (incomplete last global batch)",
      n_, batch_, rank_, max_batch_per_rank(), world_, global_batch(), steps_per_epoch(),
      dropped_per_epoch());
}

DataCursor ShardedSampler::convert_cursor(DataCursor c, std::size_t old_global_batch,
                                          std::size_t new_global_batch) {
  RT_CHECK(old_global_batch > 0 && new_global_batch > 0,
           "resume: global batch sizes must be positive (old {}, new {})", old_global_batch,
           new_global_batch);
  const std::uint64_t position = c.step * old_global_batch;
  RT_CHECK(position % new_global_batch == 0,
           "resume: the checkpoint stopped at sample {} of epoch {} (step {} x global batch {}), "
           "which is not a multiple of the new global batch {}: choose --batch x world so that it "
           "divides {}",
           position, c.epoch, c.step, old_global_batch, new_global_batch, position);
  return {c.epoch, position / new_global_batch};
}

EvalShard eval_shard(std::size_t n, int rank, int world) {
  RT_CHECK(world >= 1 && rank >= 0 && rank < world, "eval_shard: rank {} outside [0, {})", rank,
           world);
  const std::size_t w = static_cast<std::size_t>(world), r = static_cast<std::size_t>(rank);
  const std::size_t base = n / w, extra = n % w;
  const std::size_t begin = r * base + std::min(r, extra);
  return {begin, begin + base + (r < extra ? 1 : 0)};
}

}  // namespace ringtrain
