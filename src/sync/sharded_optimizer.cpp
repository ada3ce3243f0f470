#include "ringtrain/sync/sharded_optimizer.h"

#include "optim/state_buffer.h"
#include "ringtrain/core/check.h"
#include "ringtrain/core/ordering_point.h"
#include "ringtrain/sync/gradient_wire.h"

namespace ringtrain {

struct ShardedOptimizer::Owned {
  StateBuffer master;
  std::vector<StateBuffer> full;  // one per inner state buffer, param_count each
  StateBuffer decay_mask;         // this rank's blocks of the --no-decay mask (as f32 0/1)
};

ShardedOptimizer::ShardedOptimizer(const OptimizerConfig& config, const ZeroLayout& layout,
                                   Communicator& comm, BufferView shard_grads, Device device,
                                   void* stream)
    : layout_(layout),
      comm_(comm),
      shard_grads_(shard_grads),
      device_(device),
      inner_(make_optimizer(config, layout.shard_count(), device)),
      owned_(std::make_unique<Owned>()) {
  set_stream(stream);
  RT_CHECK(shard_grads.count == layout.shard_count() && shard_grads.dtype == DType::f32,
           "internal: ZeRO shard gradients of {} {} for a shard of {}", shard_grads.count,
           dtype_name(shard_grads.dtype), layout.shard_count());
  owned_->master = StateBuffer(layout.shard_count(), device);
  staging_ = comm_.allocate(layout.padded_count(), DType::f32);
  zero_on_stream(staging_, nullptr);
  requests_.resize(layout.blocks().size());
}

ShardedOptimizer::~ShardedOptimizer() = default;

void ShardedOptimizer::set_stream(void* stream) {
  stream_ = stream;
  inner_->set_stream(stream);
}

void ShardedOptimizer::set_decay_mask(BufferView mask) {
  RT_CHECK(mask.count == layout_.param_count() && mask.dtype == DType::f32,
           "internal: a decay mask of {} {} for {} parameters", mask.count, dtype_name(mask.dtype),
           layout_.param_count());
  // This rank's blocks of the mask, so the shard's decay is the unsharded one's.
  owned_->decay_mask = StateBuffer(layout_.shard_count(), device_);
  const BufferView shard = owned_->decay_mask.view();
  for (const ZeroBlock& z : layout_.blocks())
    copy_on_stream(shard.slice(z.shard_offset, z.own_count), mask.slice(z.own_offset, z.own_count),
                   stream_);
  inner_->set_decay_mask(shard);
}

void ShardedOptimizer::load_master(BufferView params) {
  RT_CHECK(params.count == layout_.param_count(), "internal: {} parameters for a layout of {}",
           params.count, layout_.param_count());
  const BufferView master = owned_->master.view();
  for (const ZeroBlock& z : layout_.blocks())
    copy_on_stream(master.slice(z.shard_offset, z.own_count),
                   params.slice(z.own_offset, z.own_count), stream_);
}

void ShardedOptimizer::all_gather(BufferView shard, BufferView full) {
  const auto world = static_cast<std::size_t>(layout_.world());
  const auto rank = static_cast<std::size_t>(layout_.rank());
  gathered_bytes_ = 0;
  // This rank's blocks into its places in the staging buffer, where each
  // bucket's all-gather runs in place (NCCL's convention, communicator.h).
  for (const ZeroBlock& z : layout_.blocks())
    copy_on_stream(staging_.slice(z.staging_offset + rank * z.block, z.block),
                   shard.slice(z.shard_offset, z.block), stream_);
  if (world > 1) {
    comm_.order_after(OrderingPoint::record(device_, stream_));
    for (std::size_t b = 0; b < layout_.blocks().size(); ++b) {
      const ZeroBlock& z = layout_.blocks()[b];
      const BufferView region = staging_.slice(z.staging_offset, world * z.block);
      requests_[b] =
          comm_.allgather_async(staging_.slice(z.staging_offset + rank * z.block, z.block), region);
      gathered_bytes_ += region.bytes();
    }
  }
  for (std::size_t b = 0; b < layout_.blocks().size(); ++b) {
    const ZeroBlock& z = layout_.blocks()[b];
    if (world > 1) {
      const OrderingPoint done = requests_[b].completion();
      if (done.empty())
        requests_[b].wait();
      else
        done.order_stream(stream_);
    }
    copy_on_stream(full.slice(z.bucket_offset, z.bucket_count),
                   staging_.slice(z.staging_offset, z.bucket_count), stream_);
  }
}

void ShardedOptimizer::step(BufferView params, BufferView /*grads*/, float lr) {
  inner_->set_update_gate(gate_);
  inner_->step(owned_->master.view(), shard_grads_, lr);
  all_gather(owned_->master.view(), params);
}

std::vector<NamedBuffer> ShardedOptimizer::state() {
  std::vector<NamedBuffer> shards = inner_->state();
  if (owned_->full.size() != shards.size()) {
    owned_->full.clear();
    for (std::size_t i = 0; i < shards.size(); ++i)
      owned_->full.emplace_back(layout_.param_count(), device_);
  }
  std::vector<NamedBuffer> full;
  for (std::size_t i = 0; i < shards.size(); ++i)
    full.push_back({shards[i].name, owned_->full[i].view()});
  return full;
}

void ShardedOptimizer::gather_state() {
  const std::vector<NamedBuffer> full = state();
  const std::vector<NamedBuffer> shards = inner_->state();
  for (std::size_t i = 0; i < shards.size(); ++i) all_gather(shards[i].view, full[i].view);
}

void ShardedOptimizer::scatter_state() {
  const std::vector<NamedBuffer> full = state();
  const std::vector<NamedBuffer> shards = inner_->state();
  for (std::size_t i = 0; i < shards.size(); ++i)
    for (const ZeroBlock& z : layout_.blocks())
      copy_on_stream(shards[i].view.slice(z.shard_offset, z.own_count),
                     full[i].view.slice(z.own_offset, z.own_count), stream_);
  release_full_state();
}

void ShardedOptimizer::release_full_state() {
  owned_->full.clear();
}

}  // namespace ringtrain
