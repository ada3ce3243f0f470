#include "ringtrain/train/batch_split.h"

#include <fmt/format.h>

#include "ringtrain/core/check.h"

namespace ringtrain {

ShardedSampler make_train_sampler(const TrainConfig& cfg, std::size_t n, int rank, int world) {
  if (cfg.global_batch == 0) return ShardedSampler(n, cfg.batch, rank, world, cfg.seed);
  RT_CHECK(cfg.global_batch % cfg.accum == 0, "--global-batch {} must be a multiple of --accum {}",
           cfg.global_batch, cfg.accum);
  const std::size_t micro = cfg.global_batch / cfg.accum;
  RT_CHECK(micro >= static_cast<std::size_t>(world),
           "--global-batch {} with --accum {} gives {} samples per micro-step, fewer than the {} "
           "ranks: every rank needs at least one",
           cfg.global_batch, cfg.accum, micro, world);
  return ShardedSampler::split_global(n, micro, rank, world, cfg.seed);
}

float micro_batch_grad_scale(const TrainConfig& cfg, std::size_t micro_batch) {
  // backward scales the mean loss; (b / G) x (sum / b) is this rank's share of
  // the global mean, and the all-reduce sums the shares.
  if (cfg.global_batch > 0)
    return static_cast<float>(micro_batch) / static_cast<float>(cfg.global_batch);
  return 1.0f / static_cast<float>(cfg.accum);
}

ReduceOp gradient_reduce_op(const TrainConfig& cfg) {
  return cfg.global_batch > 0 ? ReduceOp::sum : ReduceOp::avg;
}

std::size_t default_reference_batch(const TrainConfig& cfg) {
  return cfg.global_batch > 0 ? cfg.global_batch : cfg.batch;
}

std::string describe_batch_split(const TrainConfig& cfg, const ShardedSampler& sampler) {
  const std::size_t world = static_cast<std::size_t>(sampler.world());
  if (cfg.global_batch == 0)
    return fmt::format("global batch {} = {} per rank x {} rank(s) x {} accumulation step(s)",
                       sampler.global_batch() * cfg.accum, cfg.batch, world, cfg.accum);
  const std::size_t micro = sampler.global_batch();
  const std::size_t low = micro / world, high = sampler.max_batch_per_rank();
  return fmt::format(
      "global batch {} (--global-batch) = {} per micro-step x {} accumulation step(s), split over "
      "{} rank(s): {} per rank{}",
      cfg.global_batch, micro, cfg.accum, world,
      low == high ? fmt::format("{}", low) : fmt::format("{} or {}", low, high),
      low == high ? "" : fmt::format(" (buffers sized for {})", high));
}

}  // namespace ringtrain
