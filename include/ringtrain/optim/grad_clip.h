// Gradient clipping by global L2 norm, and scaling of a buffer by a scalar.
// The norm is one number over the whole flat gradient buffer, accumulated in
// double in a fixed order, so the same gradients give the same norm bit for bit.
// In a distributed run the trainer calls these after the all-reduce: every rank
// then holds the same averaged gradients and computes the same norm and clip
// factor, with no extra communication, and the replicas stay identical.
#pragma once

#include "ringtrain/core/buffer_view.h"
#include "ringtrain/core/device.h"

namespace ringtrain {

// sqrt(sum of g^2) over an f32 buffer on CPU or CUDA (CUDA: waits for the
// result on the default stream).
double global_grad_norm(BufferView grads);

// Scales grads by max_norm / (norm + 1e-6) when norm > max_norm (as PyTorch's
// clip_grad_norm_ does) and returns the norm before clipping. A non-finite norm
// leaves the gradients untouched and is returned, so the caller can skip the
// step or stop; max_norm must be > 0 (--clip-grad-norm).
double clip_grad_norm(BufferView grads, double max_norm);

// buf *= factor, in place, for an f32 buffer on CPU or CUDA (queued on
// `stream`, a cudaStream_t as void*; nullptr: the default stream).
void scale_buffer(BufferView buf, float factor, void* stream = nullptr);

// The training step's clip (--clip-norm), with the norm kept where the
// gradients are: on a GPU the sum of squares, the factor (kernels/
// grad_clip.cuh) and the scaling are kernels queued on the compute stream,
// so a clipped step has no host sync; on the CPU the same function runs on
// the host. Under ZeRO-1 each rank sums its shard and the sums are
// all-reduced (sum_view()) between sum_squares() and clip().
class GradClipper {
 public:
  explicit GradClipper(Device device);
  ~GradClipper();
  GradClipper(const GradClipper&) = delete;
  GradClipper& operator=(const GradClipper&) = delete;

  // Queued: the sum of squares of grads (f32), in double, into sum_view().
  void sum_squares(BufferView grads, void* stream);
  // One f64 element on the device: the sum of squares (to all-reduce).
  BufferView sum_view() const;
  // Queued: grads *= clip_factor(sum, max_norm).
  void clip(BufferView grads, double max_norm, void* stream);
  // Queued: one f32 element, 0 when the sum is finite, NaN otherwise (the
  // --nonfinite guard's view of gradients summed shard by shard).
  BufferView finite_probe(void* stream);
  // The norm of the last sum: free on the CPU; on a GPU one counted host
  // sync (read at logging points only).
  double norm() const;

 private:
  Device device_;
  double host_sum_ = 0;
  float host_probe_ = 0;
  struct DeviceMemory;
  DeviceMemory* device_memory_ = nullptr;
};

}  // namespace ringtrain
