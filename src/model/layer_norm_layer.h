// A layer of a GPT-2 class language model over per-sample [T, C] rows. It
// runs on the CPU or a GPU through the ops of ringtrain/ops/transformer_ops.h
// and the (batched) GEMM, the same code for both.
// The row arithmetic lives in kernels/layer_norm.cuh.
#pragma once

#include <string>
#include <vector>

#include "model/layer.h"
#include "model/layer_workspace.h"

namespace ringtrain {

// Normalises each row of the last dimension; weight starts at 1, bias at 0.
class LayerNormLayer final : public Layer, public StoresActivations {
 public:
  LayerNormLayer(std::string name, const Shape& input, float eps, const ComputeContext& ctx,
                 std::size_t max_batch);
  std::vector<ParamDesc> param_descs() const override;
  void bind(float* params, float* grads) override;
  void forward(const float* x, float* y, std::size_t batch, bool training) override;
  void backward(const float* x, const float* y, const float* dy, float* dx, std::size_t batch,
                bool accumulate) override;
  void forward_stored(const std::vector<BufferView>& xs, BufferView y, std::size_t batch,
                      bool training) override;
  void backward_stored(const std::vector<BufferView>& xs, BufferView y, BufferView dy,
                       const std::vector<BufferView>& dxs, std::size_t batch,
                       bool accumulate) override;

  // Fused with the residual add whose sum it reads (ops/residual_layer_norm.h):
  // what the model's plan calls where it folds that add into this layer's
  // node (model/fused_residual_layer_norm.h). The add's inputs x0, x1 and
  // scale; `sum` is the add's output buffer, d_sum its gradient's.
  void forward_residual(BufferView x0, BufferView x1, float scale, BufferView sum, BufferView y,
                        std::size_t batch);
  void backward_residual(BufferView sum, BufferView dy, BufferView d_sum, bool summed, float scale,
                         BufferView dx0, BufferView dx1, std::size_t batch, bool accumulate);

 private:
  const ComputeContext& ctx_;
  std::size_t rows_, c_;
  float eps_;
  LayerWorkspace mean_, rstd_;  // per row of the last forward
  float *w_ = nullptr, *b_ = nullptr, *dw_ = nullptr, *db_ = nullptr;
};

}  // namespace ringtrain
