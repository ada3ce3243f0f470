// A layer of a GPT-2 class language model over per-sample [T, C] rows. It
// runs on the CPU or a GPU through the ops of ringtrain/ops/transformer_ops.h
// and the (batched) GEMM, the same code for both.
#pragma once

#include <string>

#include "model/layer.h"
#include "ringtrain/tensor/tensor.h"

namespace ringtrain {

// [T, C] -> [T, vocab] logits = x E^T with E the token embedding's weight
// (weight tying, as GPT-2): no parameters of its own; Model binds it to the
// embedding's, and its weight gradient is added there.
//
// On a GPU under bf16/fp16 it stores its activations: x, the logits and their
// gradient stay the model's 16-bit buffers, and its three products run on
// tensor cores, as PyTorch's autocast runs a linear layer: the logits x E16ᵀ
// and dx = dy E16 read a 16-bit copy of the fp32 table, narrowed once per
// forward; their fp32 products go through the layer's own fp32 scratch a block
// of rows at a time and are rounded once, so that the model needs no fp32
// copy of the whole [rows, vocab] logits (GPT-2 at 16 x 1024 tokens: 3.3 GB
// each). dE = dyᵀ x reads the two 16-bit tensors in place into the fp32
// gradient. On the CPU the model's adapter runs it in fp32 with the fp32 E.
class TiedLmHeadLayer final : public Layer,
                              public StoresActivations,
                              public IgnoresOutputInBackward {
 public:
  // block_floats: the stored path's scratch (0: 256 MiB; tests pass less,
  // to run several blocks).
  TiedLmHeadLayer(std::string name, const Shape& input, std::string embedding, std::size_t vocab,
                  const ComputeContext& ctx, std::size_t max_batch = 1,
                  std::size_t block_floats = 0);
  const std::string& tied_to() const override { return embedding_; }
  void bind(float* params, float* grads) override;
  void forward(const float* x, float* y, std::size_t batch, bool training) override;
  void backward(const float* x, const float* y, const float* dy, float* dx, std::size_t batch,
                bool accumulate) override;
  bool stores_activations() const override {
    return ctx_.is_cuda() && ctx_.precision() != DType::f32;
  }
  void forward_stored(const std::vector<BufferView>& xs, BufferView y, std::size_t batch,
                      bool training) override;
  void backward_stored(const std::vector<BufferView>& xs, BufferView y, BufferView dy,
                       const std::vector<BufferView>& dxs, std::size_t batch,
                       bool accumulate) override;
  // The stored path's GEMM width: vocab rounded up to 16-byte aligned rows.
  static std::size_t padded_vocab(std::size_t vocab);
  // Rows per block of the stored path's fp32 scratch.
  std::size_t block_rows() const { return block_rows_; }

 private:
  const ComputeContext& ctx_;
  std::string embedding_;
  std::size_t t_, c_, vocab_;
  std::size_t vocab_padded_;  // the stored path's GEMM width (kVocabAlign)
  const float* e_ = nullptr;
  float* de_ = nullptr;
  // The stored path's scratch: block_rows_ x (C + padded vocab) floats, a
  // block's fp32 dx beside its fp32 logits (forward) or its 16-bit dy copied
  // to the padded width (backward).
  std::size_t block_rows_ = 0;
  Tensor block_;
  Tensor e16_;  // the stored path's 16-bit copy of E, made at each forward
};

}  // namespace ringtrain
