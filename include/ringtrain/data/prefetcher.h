// Background batch loading. A thread reads the next batches (sampler indices,
// Dataset::read into float32) into a bounded queue of `depth` ready batches in
// host memory (pinned when the device is a GPU). On a GPU it then copies each
// batch to the device on its own CUDA stream and waits for that copy on the
// loader thread, so the next batch is staged while the current step runs and a
// batch handed out is already resident.
#pragma once

#include <cstddef>
#include <memory>
#include <optional>

#include "ringtrain/core/buffer_view.h"
#include "ringtrain/core/device.h"
#include "ringtrain/core/ordering_point.h"
#include "ringtrain/data/dataset.h"
#include "ringtrain/data/sharded_sampler.h"

namespace ringtrain {

struct Batch {
  BufferView x;  // size * sample_elements float32, normalised, on the device
  BufferView y;  // size * labels_per_sample int32 labels, on the device
  std::size_t size = 0;
  DataCursor cursor;          // the step this batch is (training); {0, batch number} in evaluation
  double wait_seconds = 0.0;  // how long next() blocked for it: >0 means the loader was behind
};

class BatchPipeline;  // the loader thread and its slots (src/data/batch_pipeline.h)

class Prefetcher {
 public:
  // Starts loading at `start` (normalised: an end-of-epoch cursor starts the
  // next epoch). Logs the sampler's plan once, on rank 0. The dataset must
  // outlive the prefetcher; the sampler is copied.
  Prefetcher(Dataset& dataset, const ShardedSampler& sampler, DataCursor start,
             std::size_t depth = 2, Device device = Device::cpu());
  ~Prefetcher();
  Prefetcher(const Prefetcher&) = delete;
  Prefetcher& operator=(const Prefetcher&) = delete;

  // Blocks until the next batch is ready; batches come in cursor order, rolling
  // over epochs forever. The returned views stay valid until the next call;
  // on a GPU, pass a point behind the last kernel that read the previous batch
  // (its slot is refilled only after it). An error on the loader thread (a
  // corrupt chunk, say) is rethrown here.
  Batch next(const OrderingPoint& previous_done = {});
  const ShardedSampler& sampler() const;

 private:
  std::shared_ptr<const ShardedSampler> sampler_;
  std::unique_ptr<BatchPipeline> pipeline_;
};

// The evaluation batches of one rank: [shard.begin, shard.end) in order, in
// batches of up to `batch` samples, with the same background loading.
class EvalBatches {
 public:
  EvalBatches(Dataset& dataset, EvalShard shard, std::size_t batch, std::size_t depth = 2,
              Device device = Device::cpu());
  ~EvalBatches();
  EvalBatches(const EvalBatches&) = delete;
  EvalBatches& operator=(const EvalBatches&) = delete;

  std::size_t num_batches() const { return num_batches_; }
  // The next batch, or nullopt after the last one. Views valid until the next call.
  std::optional<Batch> next();

 private:
  std::size_t num_batches_ = 0, handed_out_ = 0;
  std::unique_ptr<BatchPipeline> pipeline_;
};

}  // namespace ringtrain
