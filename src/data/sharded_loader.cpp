// ShardedLoader: Dataset, ShardedSampler and Prefetcher together, with the
// cursor (sharded_loader.h).
#include "ringtrain/data/sharded_loader.h"

#include "ringtrain/core/check.h"

namespace ringtrain {

ShardedLoader::ShardedLoader(Communicator& control, const std::string& path,
                             const std::string& split, std::size_t batch_per_rank, int rank,
                             int world, std::uint64_t seed, DataCursor start, Device device,
                             std::size_t prefetch_depth)
    : dataset_(std::make_unique<Dataset>(Dataset::open_on_all_ranks(path, split, control))),
      sampler_(
          std::make_unique<ShardedSampler>(dataset_->size(), batch_per_rank, rank, world, seed)) {
  cursor_ = sampler_->normalize(start);
  prefetcher_ = std::make_unique<Prefetcher>(*dataset_, *sampler_, cursor_, prefetch_depth, device);
}

ShardedLoader::~ShardedLoader() = default;

Batch ShardedLoader::next(const OrderingPoint& previous_done) {
  Batch batch = prefetcher_->next(previous_done);
  RT_CHECK(batch.cursor == cursor_, "internal: loader at epoch {} step {}, expected {} step {}",
           batch.cursor.epoch, batch.cursor.step, cursor_.epoch, cursor_.step);
  cursor_ = sampler_->next(cursor_);
  return batch;
}

}  // namespace ringtrain
