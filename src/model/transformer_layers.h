// The layers of a GPT-2 class language model, over per-sample [T, C] rows:
// token and position embeddings, layer_norm, causal multi-head self-attention
// with a fused QKV projection, and the language-model head tied to the token
// embedding. Token ids enter as floats (exact below 2^24; see
// ringtrain/data/token_data.h), so the layer interface stays float.
//
// They run on the CPU or a GPU through the ops of
// ringtrain/ops/transformer_ops.h and the (batched) GEMM, the same code for
// both; the row arithmetic lives in kernels/layer_norm.cuh and
// kernels/causal_attention.cuh, shared by the CPU loops and the CUDA kernels.
#pragma once

#include <cstdint>
#include <vector>

#include "model/layer.h"
#include "ringtrain/tensor/tensor.h"

namespace ringtrain {

// A float workspace of a layer on the context's device, per sample times the
// batch. On a GPU it is allocated once at build time for the largest batch
// (the hot loop neither allocates nor waits); on the CPU it grows on first use
// instead, so that `model show --model gpt2` stays cheap.
class LayerWorkspace {
 public:
  LayerWorkspace() = default;
  LayerWorkspace(const ComputeContext& ctx, std::size_t per_sample, std::size_t max_batch);
  // Room for `batch` samples; an Error naming `layer` past the GPU's max batch.
  float* get(std::size_t batch, const std::string& layer);

 private:
  Device device_ = Device::cpu();
  std::size_t per_sample_ = 0, max_batch_ = 0;
  Tensor data_;
};

// GPT-2's initialisation, N(0, 0.02), through the model's Kaiming fill
// (std = sqrt(2 / fan_in)).
inline constexpr std::size_t kGpt2InitFanIn = 5000;

// [T] token ids -> [T, C] rows of the weight [vocab, C] (GPT-2's wte).
class TokenEmbeddingLayer final : public Layer {
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
  std::size_t vocab() const { return vocab_; }
  std::size_t dim() const { return dim_; }

 private:
  const ComputeContext& ctx_;
  std::size_t t_, vocab_, dim_;
  bool shared_ = false;  // a tied head adds to dW before this backward runs
  float *w_ = nullptr, *dw_ = nullptr;
  Tensor sort_workspace_;  // the GPU's ordered gradient (sized for max_batch)
};

// [T, C] + the learned position rows [context, C] (GPT-2's wpe), T <= context.
class PositionEmbeddingLayer final : public Layer {
 public:
  PositionEmbeddingLayer(std::string name, const Shape& input, std::size_t context,
                         const ComputeContext& ctx);
  std::vector<ParamDesc> param_descs() const override;
  void bind(float* params, float* grads) override;
  void forward(const float* x, float* y, std::size_t batch, bool training) override;
  void backward(const float* x, const float* y, const float* dy, float* dx, std::size_t batch,
                bool accumulate) override;

 private:
  const ComputeContext& ctx_;
  std::size_t t_, c_, context_;
  float *w_ = nullptr, *dw_ = nullptr;
};

// Normalises each row of the last dimension; weight starts at 1, bias at 0.
class LayerNormLayer final : public Layer {
 public:
  LayerNormLayer(std::string name, const Shape& input, float eps, const ComputeContext& ctx,
                 std::size_t max_batch);
  std::vector<ParamDesc> param_descs() const override;
  void bind(float* params, float* grads) override;
  void forward(const float* x, float* y, std::size_t batch, bool training) override;
  void backward(const float* x, const float* y, const float* dy, float* dx, std::size_t batch,
                bool accumulate) override;

 private:
  const ComputeContext& ctx_;
  std::size_t rows_, c_;
  float eps_;
  LayerWorkspace mean_, rstd_;  // per row of the last forward
  LayerWorkspace scratch_;      // GPU backward: dy * xhat, rows x c
  float *w_ = nullptr, *b_ = nullptr, *dw_ = nullptr, *db_ = nullptr;
};

// Causal multi-head self-attention on [T, C] with `heads` heads of C/heads:
// qkv = x Wqkv^T + b (GPT-2's c_attn, [3C, C]), per head P = causal
// softmax(Q K^T / sqrt(d)), O = dropout(P) V, y = O Wo^T + bo (c_proj).
// Forward keeps qkv, P ([heads, batch, T, T]) and O for backward; the GEMMs
// run per head, batched over the samples. Attention dropout (GPT-2's
// attn_dropout, probability `dropout`, training only) draws its mask from
// the counter-based hash of kernels/dropout.cuh keyed by (seed, rank, step,
// node, head), so backward recomputes it and a resume repeats it.
class CausalSelfAttentionLayer final : public Layer {
 public:
  CausalSelfAttentionLayer(std::string name, const Shape& input, std::size_t heads,
                           const ComputeContext& ctx, std::size_t max_batch, float dropout = 0.0f,
                           std::size_t index = 0, const DropoutContext* dropout_context = nullptr);
  bool matmul_weights() const override { return true; }
  std::vector<ParamDesc> param_descs() const override;
  void bind(float* params, float* grads) override;
  void forward(const float* x, float* y, std::size_t batch, bool training) override;
  void backward(const float* x, const float* y, const float* dy, float* dx, std::size_t batch,
                bool accumulate) override;

 private:
  std::uint64_t head_key(std::size_t head) const;
  const ComputeContext& ctx_;
  std::size_t t_, c_, heads_, d_;
  float dropout_;
  std::size_t index_;
  const DropoutContext* dropout_context_;
  bool dropped_ = false;  // the last forward applied the attention dropout
  // qkv and O per sample; P per sample (all heads); one head's worth of
  // dropped P and of dP (reused head after head).
  LayerWorkspace qkv_, o_, d_o_, d_qkv_, p_, p_drop_, d_p_;
  float *w_qkv_ = nullptr, *b_qkv_ = nullptr, *w_o_ = nullptr, *b_o_ = nullptr;
  float *dw_qkv_ = nullptr, *db_qkv_ = nullptr, *dw_o_ = nullptr, *db_o_ = nullptr;
};

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
