// Gradient averaging over a program's own flat gradient buffer, with the
// overlap `ringtrain train` uses: register the parameter tensors in the order
// backward finishes them, and buckets (slices of the buffer, at most
// bucket_cap_bytes each) are all-reduced on the communication thread (CPU) or
// stream (GPU) as soon as their last tensor is marked ready, while backward
// goes on. wait() returns when every bucket holds the average over all ranks.
//
//   ringtrain::ParamGradientSync sync(rt.comm(), grads);
//   sync.add_param("fc2", fc2_offset, fc2_count);   // backward order: last layer first
//   sync.add_param("fc1", 0, fc1_count);
//   each step: sync.begin_step();
//              backward: ... sync.mark_ready(0); ... sync.mark_ready(1);
//              sync.wait();  optimizer step
//
// Backward order runs down the buffer: the first tensor registered sits at its
// end, the last at offset 0, and together they cover it without gaps (the
// layout a model with its parameters in layer order has). Buckets are the same
// on every rank, so no negotiation is needed; every rank must register the
// same tensors.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "ringtrain/comm/communicator.h"
#include "ringtrain/core/buffer_view.h"
#include "ringtrain/sync/bucket_plan.h"

namespace ringtrain {

class GradientSynchronizer;

class ParamGradientSync {
 public:
  // grads: f32, the whole flat gradient buffer (comm.allocate() gives one the
  // backend reduces without a copy). compute_stream: where backward queues its
  // kernels on a GPU (cudaStream_t as void*; nullptr on the CPU).
  ParamGradientSync(Communicator& comm, BufferView grads,
                    std::size_t bucket_cap_bytes = std::size_t{25} << 20, bool overlap = true,
                    void* compute_stream = nullptr);
  ~ParamGradientSync();
  ParamGradientSync(const ParamGradientSync&) = delete;
  ParamGradientSync& operator=(const ParamGradientSync&) = delete;

  // Registers the next tensor in backward order; returns its id (0, 1, ...).
  // offset and count are elements of grads. Only before the first begin_step.
  std::size_t add_param(std::string name, std::size_t offset, std::size_t count);
  // The buckets (fixed by the first begin_step, or by this call).
  const BucketPlan& buckets();

  // sync = false accumulates locally (the first micro-batches of gradient
  // accumulation): nothing is all-reduced until a step with sync = true.
  void begin_step(bool sync = true);
  // Tensor `id`'s gradient is final. Ids must be marked in registration order.
  void mark_ready(std::size_t id);
  // Launches what is left and waits (on a GPU: orders compute_stream after
  // every bucket). Error naming the tensors never marked ready.
  void wait();
  // Seconds wait() spent: the communication backward did not hide.
  double exposed_seconds() const;

 private:
  void plan();
  struct Param {
    std::string name;
    std::size_t offset, count;
  };
  Communicator& comm_;
  BufferView grads_;
  std::size_t cap_bytes_;
  bool overlap_;
  void* stream_;
  std::vector<Param> params_;
  std::unique_ptr<BucketPlan> plan_;
  std::unique_ptr<GradientSynchronizer> sync_;
  std::size_t next_ready_ = 0;
};

}  // namespace ringtrain
