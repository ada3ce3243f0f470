// 2-D max pooling over NCHW float tensors (no padding; the output size rounds
// down). CPU: the forward records each window's argmax, so backward is one
// scatter. GPU: cuDNN (deterministic max mode). Ties go to the first maximum
// on the CPU.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "ringtrain/ops/compute_context.h"
#include "ringtrain/tensor/tensor.h"

namespace ringtrain {

struct MaxPool2dGeometry {
  std::size_t channels = 0, height = 0, width = 0;
  std::size_t kernel = 2, stride = 2;

  std::size_t out_height() const { return (height - kernel) / stride + 1; }
  std::size_t out_width() const { return (width - kernel) / stride + 1; }
  void validate() const;
};

namespace detail {
class GpuPoolPlan;
}

class MaxPool2dOp {
 public:
  MaxPool2dOp(const ComputeContext& ctx, const MaxPool2dGeometry& geometry, std::size_t max_batch);
  ~MaxPool2dOp();
  MaxPool2dOp(const MaxPool2dOp&) = delete;
  MaxPool2dOp& operator=(const MaxPool2dOp&) = delete;

  const MaxPool2dGeometry& geometry() const { return g_; }
  void forward(const float* x, float* y, std::size_t batch);
  // dx is overwritten. Needs the x and y of the matching forward.
  void backward(const float* x, const float* y, const float* dy, float* dx, std::size_t batch);

 private:
  const ComputeContext& ctx_;
  MaxPool2dGeometry g_;
  std::size_t max_batch_;
  Tensor argmax_;  // CPU: int32 index within the sample's plane, per output
  std::unique_ptr<detail::GpuPoolPlan> gpu_;
};

}  // namespace ringtrain
