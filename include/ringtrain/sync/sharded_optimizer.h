// ZeRO-1 (--zero 1): the optimizer state and the fp32 master weights are
// sharded over the ranks by the blocks of zero_layout.h. Each rank keeps only
// its shard: the master weights of its blocks, the state of an ordinary
// optimizer (SGD, AdamW) sized to the shard, and the reduced gradients of its
// blocks (reduce-scattered into GradientSynchronizer::shard_gradients()
// bucket by bucket during backward). A step updates the shard, then
// all-gathers the parameters bucket by bucket into the flat parameter buffer
// (at the end of the step, not overlapped with the next forward).
//
// A checkpoint holds the whole state: gather_state() assembles full-size
// copies (state() returns them, named as the unsharded optimizer's), so a
// ZeRO checkpoint resumes at any world size, with or without --zero 1, and an
// ordinary checkpoint resumes under ZeRO (scatter_state()).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "ringtrain/comm/communicator.h"
#include "ringtrain/optim/optimizer.h"
#include "ringtrain/sync/zero_layout.h"

namespace ringtrain {

class ShardedOptimizer final : public Optimizer {
 public:
  // layout and comm (the gradient communicator) must outlive the optimizer;
  // shard_grads: the synchronizer's shard_gradients(); stream: the compute
  // stream (cudaStream_t as void*; nullptr on the CPU). Collective: it
  // allocates the all-gather's staging buffer from comm.
  ShardedOptimizer(const OptimizerConfig& config, const ZeroLayout& layout, Communicator& comm,
                   BufferView shard_grads, Device device, void* stream);
  ~ShardedOptimizer() override;

  // Updates this rank's shard from its reduced gradients (`grads`, the full
  // local buffer, is not read), then all-gathers `params`. Collective.
  void step(BufferView params, BufferView grads, float lr) override;
  // Full-size copies of the state, as the unsharded optimizer names them;
  // allocated on first use, filled by gather_state() or written by a resume.
  std::vector<NamedBuffer> state() override;
  std::uint64_t step_count() const override { return inner_->step_count(); }
  void set_step_count(std::uint64_t steps) override { inner_->set_step_count(steps); }
  std::size_t state_bytes() const override { return inner_->state_bytes(); }
  void set_decay_mask(BufferView mask) override;
  // The shard's update and the all-gather's copies go on `stream` too.
  void set_stream(void* stream) override;

  // Collective: this rank's blocks of `params` become its master weights
  // (after the start-up broadcast or a resume).
  void load_master(BufferView params);
  // Collective: fills state()'s full copies from every rank's shard.
  void gather_state();
  // After state()'s full copies were written and are the same on every rank
  // (a resume, broadcast): each rank keeps its blocks; the copies are freed.
  void scatter_state();
  // Frees the full copies (after a checkpoint).
  void release_full_state();

  const ZeroLayout& layout() const { return layout_; }
  BufferView shard_gradients() const { return shard_grads_; }
  std::size_t master_bytes() const { return layout_.shard_count() * sizeof(float); }
  // Bytes the last step's parameter all-gather wrote (0 on one rank).
  std::size_t gathered_bytes() const { return gathered_bytes_; }

 private:
  // Every rank's blocks of `shard` (shard_count elements) into `full`.
  void all_gather(BufferView shard, BufferView full);

  const ZeroLayout& layout_;
  Communicator& comm_;
  BufferView shard_grads_;
  Device device_;
  std::unique_ptr<Optimizer> inner_;
  struct Owned;  // master weights, full state copies (optim's StateBuffer)
  std::unique_ptr<Owned> owned_;
  BufferView staging_;  // padded_count f32 from comm: the all-gather's buffer
  std::vector<CommRequest> requests_;
  std::size_t gathered_bytes_ = 0;
};

}  // namespace ringtrain
