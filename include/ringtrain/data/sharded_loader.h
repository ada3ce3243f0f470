// The training loader of `ringtrain train` for a program's own loop: a split
// of a ringtrain HDF5 dataset, sharded by the same rule (sharded_sampler.h:
// one permutation per (seed, epoch), global step s covers [s*G, (s+1)*G), rank
// r reads its contiguous slice), read ahead by a background thread, with the
// data cursor that goes into checkpoints.
//
//   ringtrain::ShardedLoader loader("fashion.h5", "train", 32, rt.rank(), rt.world_size(), seed);
//   for (...) {
//     ringtrain::Batch b = loader.next();   // b.x: 32 x sample floats, b.y: 32 labels
//     ...
//   }
//   save ... loader.cursor() ...            // resume with `start`
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "ringtrain/core/device.h"
#include "ringtrain/data/dataset.h"
#include "ringtrain/data/prefetcher.h"
#include "ringtrain/data/sharded_sampler.h"

namespace ringtrain {

class Communicator;

class ShardedLoader {
 public:
  // Collective over `control`: every rank opens the file (Error naming it and
  // the rank when it is missing or malformed; the communicator's timeout when a
  // rank never does). `start` is the cursor to resume from.
  ShardedLoader(Communicator& control, const std::string& path, const std::string& split,
                std::size_t batch_per_rank, int rank, int world, std::uint64_t seed,
                DataCursor start = {}, Device device = Device::cpu(),
                std::size_t prefetch_depth = 2);
  ~ShardedLoader();
  ShardedLoader(const ShardedLoader&) = delete;
  ShardedLoader& operator=(const ShardedLoader&) = delete;

  // This rank's batch at cursor(), then the cursor moves on (to step 0 of the
  // next epoch after the last full global batch). The batch's memory stays
  // valid until the next call; on a GPU, pass an ordering point recorded after
  // the last kernel that reads it.
  Batch next(const OrderingPoint& previous_done = {});
  // The next global step to read: save it in checkpoints.
  DataCursor cursor() const { return cursor_; }

  Dataset& dataset() { return *dataset_; }
  const ShardedSampler& sampler() const { return *sampler_; }
  std::size_t steps_per_epoch() const { return sampler_->steps_per_epoch(); }

 private:
  std::unique_ptr<Dataset> dataset_;
  std::unique_ptr<ShardedSampler> sampler_;
  std::unique_ptr<Prefetcher> prefetcher_;
  DataCursor cursor_;
};

}  // namespace ringtrain
