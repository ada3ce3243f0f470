#include "ringtrain/data/prefetcher.h"

#include <mutex>
#include <string>

#include "data/batch_pipeline.h"
#include "ringtrain/core/check.h"
#include "ringtrain/core/log.h"

namespace ringtrain {

Prefetcher::Prefetcher(Dataset& dataset, const ShardedSampler& sampler, DataCursor start,
                       std::size_t depth, Device device) {
  RT_CHECK(sampler.size() == dataset.size(),
           "prefetcher: the sampler was built for N = {} but {} has N = {}", sampler.size(),
           dataset.describe(), dataset.size());
  {
    // Once per plan, not once per prefetcher (evaluation and benchmarks make many).
    static std::mutex m;
    static std::string last;
    std::lock_guard lock(m);
    if (sampler.describe() != last) log0("{}", last = sampler.describe());
  }
  auto owned = std::make_shared<ShardedSampler>(sampler);
  const DataCursor first = owned->normalize(start);
  // Batch k is the k-th step from `first`; steps are computed in order on the
  // loader thread, so a cursor walk is enough.
  auto cursor = std::make_shared<DataCursor>(first);
  BatchPipeline::Plan plan = [owned, cursor](std::uint64_t, std::vector<std::uint64_t>& indices,
                                             DataCursor& c) {
    c = *cursor;
    indices = owned->rank_indices(c);
    *cursor = owned->next(c);
    return true;
  };
  pipeline_ = std::make_unique<BatchPipeline>(dataset, sampler.batch_per_rank(), std::move(plan),
                                              depth, device);
  sampler_ = owned;
}

Prefetcher::~Prefetcher() = default;

Batch Prefetcher::next(const OrderingPoint& previous_done) {
  return *pipeline_->next(previous_done);
}

const ShardedSampler& Prefetcher::sampler() const {
  return *sampler_;
}

EvalBatches::EvalBatches(Dataset& dataset, EvalShard shard, std::size_t batch, std::size_t depth,
                         Device device) {
  RT_CHECK(batch >= 1, "evaluation batch size must be >= 1, got {}", batch);
  RT_CHECK(shard.begin <= shard.end && shard.end <= dataset.size(),
           "evaluation shard [{}, {}) outside {} (N = {})", shard.begin, shard.end,
           dataset.describe(), dataset.size());
  num_batches_ = (shard.size() + batch - 1) / batch;
  BatchPipeline::Plan plan = [shard, batch, n = num_batches_](std::uint64_t k,
                                                              std::vector<std::uint64_t>& indices,
                                                              DataCursor& c) {
    if (k >= n) return false;
    const std::uint64_t begin = shard.begin + k * batch;
    const std::uint64_t end = std::min<std::uint64_t>(shard.end, begin + batch);
    for (std::uint64_t i = begin; i < end; ++i) indices.push_back(i);
    c = {0, k};
    return true;
  };
  pipeline_ = std::make_unique<BatchPipeline>(dataset, batch, std::move(plan), depth, device);
}

EvalBatches::~EvalBatches() = default;

std::optional<Batch> EvalBatches::next() {
  std::optional<Batch> b = pipeline_->next();
  if (b) ++handed_out_;
  return b;
}

}  // namespace ringtrain
