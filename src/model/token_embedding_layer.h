// A layer of a GPT-2 class language model over per-sample [T, C] rows. It
// runs on the CPU or a GPU through the ops of ringtrain/ops/transformer_ops.h
// and the (batched) GEMM, the same code for both.
#pragma once

#include <string>
#include <vector>

#include "model/layer.h"
#include "ringtrain/tensor/tensor.h"

namespace ringtrain {

// Token ids enter as floats (exact below 2^24; see
// ringtrain/data/token_data.h), so the layer interface stays float.
// [T] token ids -> [T, C] rows of the weight [vocab, C] (GPT-2's wte).
class TokenEmbeddingLayer final : public Layer,
                                  public StoresActivations,
                                  public IgnoresOutputInBackward {
 public:
  TokenEmbeddingLayer(std::string name, const Shape& input, std::size_t vocab, std::size_t dim,
                      const ComputeContext& ctx, std::size_t max_batch);
  std::vector<ParamDesc> param_descs() const override;
  void bind(float* params, float* grads) override;
  void forward(const float* x, float* y, std::size_t batch, bool training) override;
  void backward(const float* x, const float* y, const float* dy, float* dx, std::size_t batch,
                bool accumulate) override;
  void set_gradient_shared() override { shared_ = true; }
  bool reads_token_ids() const override { return true; }
  // The ids in (fp32, as the data carry them), the rows out in the storage dtype.
  void forward_stored(const std::vector<BufferView>& xs, BufferView y, std::size_t batch,
                      bool training) override;
  void backward_stored(const std::vector<BufferView>& xs, BufferView y, BufferView dy,
                       const std::vector<BufferView>& dxs, std::size_t batch,
                       bool accumulate) override;
  std::size_t vocab() const { return vocab_; }
  std::size_t dim() const { return dim_; }

 private:
  const ComputeContext& ctx_;
  std::size_t t_, vocab_, dim_;
  bool shared_ = false;  // a tied head adds to dW before this backward runs
  float *w_ = nullptr, *dw_ = nullptr;
  Tensor sort_workspace_;  // the GPU's ordered gradient (sized for max_batch)
};

}  // namespace ringtrain
