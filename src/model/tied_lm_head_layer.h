// A layer of a GPT-2 class language model over per-sample [T, C] rows. It
// runs on the CPU or a GPU through the ops of ringtrain/ops/transformer_ops.h
// and the (batched) GEMM, the same code for both.
#pragma once

#include <string>

#include "model/layer.h"

namespace ringtrain {

// [T, C] -> [T, vocab] logits = x E^T with E the token embedding's weight
// (weight tying, as GPT-2): no parameters of its own; Model binds it to the
// embedding's, and its weight gradient is added there.
class TiedLmHeadLayer final : public Layer {
 public:
  TiedLmHeadLayer(std::string name, const Shape& input, std::string embedding, std::size_t vocab,
                  const ComputeContext& ctx);
  const std::string& tied_to() const override { return embedding_; }
  void bind(float* params, float* grads) override;
  void forward(const float* x, float* y, std::size_t batch, bool training) override;
  void backward(const float* x, const float* y, const float* dy, float* dx, std::size_t batch,
                bool accumulate) override;

 private:
  const ComputeContext& ctx_;
  std::string embedding_;
  std::size_t t_, c_, vocab_;
  const float* e_ = nullptr;
  float* de_ = nullptr;
};

}  // namespace ringtrain
