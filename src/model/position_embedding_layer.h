// A layer of a GPT-2 class language model over per-sample [T, C] rows. It
// runs on the CPU or a GPU through the ops of ringtrain/ops/transformer_ops.h
// and the (batched) GEMM, the same code for both.
#pragma once

#include <string>
#include <vector>

#include "model/layer.h"

namespace ringtrain {

// [T, C] + the learned position rows [context, C] (GPT-2's wpe), T <= context.
class PositionEmbeddingLayer final : public Layer,
                                     public StoresActivations,
                                     public IgnoresOutputInBackward {
 public:
  PositionEmbeddingLayer(std::string name, const Shape& input, std::size_t context,
                         const ComputeContext& ctx);
  std::vector<ParamDesc> param_descs() const override;
  void bind(float* params, float* grads) override;
  void forward(const float* x, float* y, std::size_t batch, bool training) override;
  void backward(const float* x, const float* y, const float* dy, float* dx, std::size_t batch,
                bool accumulate) override;
  // y = x + w[t] as a per-position bias (bias_add_into, bias_grad), in the
  // storage dtype.
  void forward_stored(const std::vector<BufferView>& xs, BufferView y, std::size_t batch,
                      bool training) override;
  void backward_stored(const std::vector<BufferView>& xs, BufferView y, BufferView dy,
                       const std::vector<BufferView>& dxs, std::size_t batch,
                       bool accumulate) override;
  bool backward_reads_input(std::size_t) const override { return false; }  // dx = dy

 private:
  const ComputeContext& ctx_;
  std::size_t t_, c_, context_;
  float *w_ = nullptr, *dw_ = nullptr;
};

}  // namespace ringtrain
