#pragma once

#include "model/layer.h"
#include "ringtrain/ops/batch_norm.h"
#include "ringtrain/tensor/tensor.h"

namespace ringtrain {

// batch_norm: weight (gamma) and bias (beta) [C] when affine; running_mean and
// running_var [C] as non-trainable buffers, PyTorch's names and semantics.
// Channels-last [C, H, W] is [H*W, C] per sample: every pixel a row of
// features, so the same statistics come from the features case (inner 1)
// over batch * H * W rows, summed in the same order.
// Its backward reads x and the batch's statistics, never y.
class BatchNormLayer final : public Layer,
                             public StoresActivations,
                             public IgnoresOutputInBackward {
 public:
  BatchNormLayer(std::string name, const Shape& input, const LayerSpec& spec,
                 const ComputeContext& ctx, Layout layout = Layout::nchw);
  std::vector<ParamDesc> param_descs() const override;
  std::vector<ParamDesc> buffer_descs() const override;
  void bind(float* params, float* grads) override;
  void bind_buffers(float* buffers) override;
  void set_batch_stat_reducer(BatchStatReducer* reducer) override { sync_ = reducer; }
  void forward(const float* x, float* y, std::size_t batch, bool training) override;
  void backward(const float* x, const float* y, const float* dy, float* dx, std::size_t batch,
                bool accumulate) override;
  void forward_stored(const std::vector<BufferView>& xs, BufferView y, std::size_t batch,
                      bool training) override;
  void backward_stored(const std::vector<BufferView>& xs, BufferView y, BufferView dy,
                       const std::vector<BufferView>& dxs, std::size_t batch,
                       bool accumulate) override;
  // batch_norm_forward and _backward write y and dx on the context's grid.

  // Fused with the relu after it, and a residual add between them (a null
  // residual: none; ops/batch_norm_relu.h): what the model's plan calls where
  // it folds those nodes into this layer's work (model/fused_batch_norm_relu.h).
  // y is the relu's output (in backward, may be null without a residual:
  // ops/batch_norm_relu.h); d_residual the add's other input's gradient;
  // dy_addend (null: none) dy's second term.
  void forward_relu(BufferView x, BufferView residual, BufferView y, std::size_t batch,
                    bool training);
  void backward_relu(BufferView x, BufferView y, BufferView dy, BufferView dx,
                     BufferView d_residual, std::size_t batch, bool accumulate,
                     BufferView dy_addend = {});

 private:
  const ComputeContext& ctx_;
  BatchNormShape shape_;
  std::size_t rows_per_sample_ = 1;  // H * W in NHWC: the op's batch is batch * H * W
  float eps_, momentum_;
  bool affine_, zero_init_;
  float *gamma_ = nullptr, *beta_ = nullptr, *dgamma_ = nullptr, *dbeta_ = nullptr;
  float *running_mean_ = nullptr, *running_var_ = nullptr;
  Tensor mean_, invstd_, sums_;  // the last forward's statistics; the sums' workspace
  BatchNormSaved saved_;
  BatchStatReducer* sync_ = nullptr;
};

}  // namespace ringtrain
