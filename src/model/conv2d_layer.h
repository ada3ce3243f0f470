#pragma once

#include "model/layer.h"
#include "ringtrain/ops/conv2d.h"

namespace ringtrain {

class Conv2dLayer final : public Layer,
                          public DescribesKernels,
                          public StoresActivations,
                          public IgnoresOutputInBackward {
 public:
  Conv2dLayer(std::string name, const Conv2dGeometry& g, const ComputeContext& ctx,
              std::size_t max_batch, bool bias = true);
  bool matmul_weights() const override { return true; }
  std::string describe_kernels() const override { return op_.describe(); }
  // Conv2dOp writes a 16-bit y before any bias, and a 16-bit dx, on every path.
  std::vector<ParamDesc> param_descs() const override;
  void bind(float* params, float* grads) override;
  void forward(const float* x, float* y, std::size_t batch, bool training) override;
  void backward(const float* x, const float* y, const float* dy, float* dx, std::size_t batch,
                bool accumulate) override;
  // Stored (16-bit activations read and written by cuDNN) where the op can.
  bool stores_activations() const override { return op_.stores_activations(); }
  bool writes_dx_on_grid(std::size_t /*input*/) const override { return true; }
  void forward_stored(const std::vector<BufferView>& xs, BufferView y, std::size_t batch,
                      bool training) override;
  void backward_stored(const std::vector<BufferView>& xs, BufferView y, BufferView dy,
                       const std::vector<BufferView>& dxs, std::size_t batch,
                       bool accumulate) override;

  // Fused with the relu after it (model/fused_conv_relu.h): the convolution,
  // then its bias and relu in one pass (ops/bias_relu.h), y the relu's output;
  // backward masks the relu's dy and reduces the bias gradient in one pass,
  // then the convolution's dW and dx (null: not wanted) from the masked dy.
  // The same bits as this layer and relu unfused. `workspace`: at least
  // relu_workspace_floats() per sample on the context's device.
  bool has_bias() const { return bias_; }
  std::size_t relu_workspace_floats() const;
  void forward_relu(BufferView x, BufferView y, std::size_t batch, float* workspace);
  void backward_relu(BufferView x, BufferView y, BufferView dy, BufferView dx, std::size_t batch,
                     bool accumulate, float* workspace);

 private:
  const ComputeContext& ctx_;
  Conv2dOp op_;
  std::size_t weight_count_;
  bool bias_;
  float *w_ = nullptr, *b_ = nullptr, *dw_ = nullptr, *db_ = nullptr;
};

}  // namespace ringtrain
