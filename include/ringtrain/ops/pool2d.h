// 2-D max and average pooling over NCHW float tensors, with zero padding per
// side (the output size rounds down, as PyTorch's ceil_mode=False). Max: padded
// positions never win (as PyTorch); the forward records each window's argmax,
// so backward is one gather, and ties go to the first maximum. Average:
// padded positions count as zeros in the divisor (PyTorch's default
// count_include_pad=True). The GPU runs the same arithmetic
// (kernels/pool2d.cuh), so both sides give the same bits. Activations may be
// channels-last (NHWC, Pool2dGeometry::layout): the same windows, the same
// sums in the same order.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "ringtrain/core/buffer_view.h"
#include "ringtrain/ops/compute_context.h"
#include "ringtrain/tensor/layout.h"
#include "ringtrain/tensor/tensor.h"

namespace ringtrain {

enum class PoolMode { max, average };

struct Pool2dGeometry {
  std::size_t channels = 0, height = 0, width = 0;
  std::size_t kernel = 2, stride = 2, padding = 0;
  PoolMode mode = PoolMode::max;
  Layout layout = Layout::nchw;  // of x, y and their gradients

  std::size_t out_height() const { return (height + 2 * padding - kernel) / stride + 1; }
  std::size_t out_width() const { return (width + 2 * padding - kernel) / stride + 1; }
  void validate() const;
};

class Pool2dOp {
 public:
  Pool2dOp(const ComputeContext& ctx, const Pool2dGeometry& geometry, std::size_t max_batch);
  ~Pool2dOp();
  Pool2dOp(const Pool2dOp&) = delete;
  Pool2dOp& operator=(const Pool2dOp&) = delete;

  const Pool2dGeometry& geometry() const { return g_; }
  void forward(const float* x, float* y, std::size_t batch);
  // dx is overwritten. Needs the x and y of the matching forward.
  void backward(const float* x, const float* y, const float* dy, float* dx, std::size_t batch);
  // The stored forms: x, y and dy are views of the model's storage dtype
  // (f32, bf16, f16), dx of it or f32; each output is computed in fp32 (a
  // max, a window's mean, the sum of the gradients an input receives) and
  // rounded once. The fp32 forms above are these with f32 views.
  void forward(BufferView x, BufferView y, std::size_t batch);
  void backward(BufferView dy, BufferView dx, std::size_t batch);

 private:
  const ComputeContext& ctx_;
  Pool2dGeometry g_;
  std::size_t max_batch_;
  // Max: each output's argmax (an int32 index within its input plane), laid
  // out as y, on the context's device; written by forward, read by backward.
  Tensor argmax_;
};

// [N, C, H, W] (or channels-last [N, H*W, C]) -> [N, C]: the mean of each
// channel's plane, summed in pixel order in either layout; backward spreads
// dy / hw over the plane (dx overwritten). x, y, dy are views of the model's
// storage dtype (f32, bf16, f16), dx of it or f32; each output is computed in
// fp32 and rounded once.
void global_avg_pool_forward(const ComputeContext& ctx, BufferView x, BufferView y,
                             std::size_t batch, std::size_t channels, std::size_t hw,
                             Layout layout);
void global_avg_pool_backward(const ComputeContext& ctx, BufferView dy, BufferView dx,
                              std::size_t batch, std::size_t channels, std::size_t hw,
                              Layout layout);

}  // namespace ringtrain
