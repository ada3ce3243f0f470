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
// Under bf16/fp16, as the model's last node, its logits and their gradient
// are stored with rows of the vocabulary padded to a multiple of 64
// (padded_vocab: GPT-2's 50,257 -> 50,304, as llm.c keeps its logits;
// PadsOutputRows), on the CPU and on a GPU alike; the loss reads the true
// vocabulary of each row and writes the gradient's padding 0.
//
// On a GPU under bf16/fp16 it stores its activations: x, the logits and their
// gradient stay the model's 16-bit buffers, and its three products run on
// tensor cores, as PyTorch's autocast runs a linear layer: the logits x E16ᵀ
// and dx = dy E16 read a 16-bit copy of the fp32 table, narrowed once per
// forward, and are written by the GEMM itself in 16 bits (rounded once), the
// logits straight into the padded buffer; dE = dyᵀ x reads the two 16-bit
// tensors in place into the fp32 gradient. No copy of the logits or of their
// gradient is made. On the CPU the model's adapter runs it in fp32 with the
// fp32 E, and narrows into (and widens from) the padded rows.
class TiedLmHeadLayer final : public Layer,
                              public StoresActivations,
                              public IgnoresOutputInBackward,
                              public PadsOutputRows {
 public:
  TiedLmHeadLayer(std::string name, const Shape& input, std::string embedding, std::size_t vocab,
                  const ComputeContext& ctx);
  const std::string& tied_to() const override { return embedding_; }
  void bind(float* params, float* grads) override;
  // The fp32 forms: y and dy [rows, vocab], unpadded.
  void forward(const float* x, float* y, std::size_t batch, bool training) override;
  void backward(const float* x, const float* y, const float* dy, float* dx, std::size_t batch,
                bool accumulate) override;
  bool stores_activations() const override {
    return ctx_.is_cuda() && ctx_.precision() != DType::f32;
  }
  // The stored forms: y and dy rows output_row_stride() apart.
  void forward_stored(const std::vector<BufferView>& xs, BufferView y, std::size_t batch,
                      bool training) override;
  void backward_stored(const std::vector<BufferView>& xs, BufferView y, BufferView dy,
                       const std::vector<BufferView>& dxs, std::size_t batch,
                       bool accumulate) override;
  std::size_t padded_row_stride(DType storage) const override;
  void set_output_row_stride(std::size_t stride) override;
  std::size_t output_row_stride() const { return row_stride_; }
  // vocab rounded up to 16-byte aligned 16-bit rows.
  static std::size_t padded_vocab(std::size_t vocab);

 private:
  const ComputeContext& ctx_;
  std::string embedding_;
  std::size_t t_, c_, vocab_;
  std::size_t vocab_padded_;  // kVocabAlign
  std::size_t row_stride_;    // of the stored forms' y and dy: vocab_ or vocab_padded_
  const float* e_ = nullptr;
  float* de_ = nullptr;
  Tensor e16_;  // the stored path's 16-bit copy of E, padded rows 0, made at each forward
};

}  // namespace ringtrain
