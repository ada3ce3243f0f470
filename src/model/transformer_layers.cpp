// CPU implementations of the transformer layers: plain loops and the gemm op,
// written for correctness first (the attention forms the whole T x T score
// matrix and masks it).
#include "model/transformer_layers.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/causal_attention.cuh"
#include "kernels/layer_norm.cuh"
#include "ringtrain/core/check.h"
#include "ringtrain/ops/bias.h"
#include "ringtrain/ops/gemm.h"

namespace ringtrain {

namespace {
void require_cpu(const ComputeContext& ctx, const std::string& layer, const char* kind) {
  RT_CHECK(!ctx.is_cuda(),
           "layer '{}': {} is not yet implemented on the GPU (transformer layers run on the CPU "
           "for now: pass --device cpu)",
           layer, kind);
}
}  // namespace

// ---------------------------------------------------------------------------
// token embedding

TokenEmbeddingLayer::TokenEmbeddingLayer(std::string name, const Shape& input, std::size_t vocab,
                                         std::size_t dim, const ComputeContext& ctx)
    : Layer(std::move(name), input, Shape{input.numel(), dim}),
      ctx_(ctx),
      t_(input.numel()),
      vocab_(vocab),
      dim_(dim) {
  require_cpu(ctx, this->name(), "token_embedding");
}

std::vector<ParamDesc> TokenEmbeddingLayer::param_descs() const {
  return {{"weight", Shape{vocab_, dim_}, kGpt2InitFanIn}};
}

void TokenEmbeddingLayer::bind(float* params, float* grads) {
  w_ = params;
  dw_ = grads;
}

void TokenEmbeddingLayer::forward(const float* x, float* y, std::size_t batch, bool) {
  for (std::size_t r = 0; r < batch * t_; ++r) {
    const float v = x[r];
    const auto id = static_cast<long long>(v);
    RT_CHECK(v >= 0.0f && static_cast<float>(id) == v && static_cast<std::size_t>(id) < vocab_,
             "layer '{}': input {} of sample {} position {} is not a token id in [0, {})", name(),
             v, r / t_, r % t_, vocab_);
    std::memcpy(y + r * dim_, w_ + static_cast<std::size_t>(id) * dim_, dim_ * sizeof(float));
  }
}

void TokenEmbeddingLayer::backward(const float* x, const float*, const float* dy, float* dx,
                                   std::size_t batch, bool accumulate) {
  if (!accumulate && !shared_) std::fill_n(dw_, vocab_ * dim_, 0.0f);
  for (std::size_t r = 0; r < batch * t_; ++r) {
    float* row = dw_ + static_cast<std::size_t>(x[r]) * dim_;
    const float* g = dy + r * dim_;
    for (std::size_t j = 0; j < dim_; ++j) row[j] += g[j];
  }
  // Token ids have no gradient.
  if (dx != nullptr) std::fill_n(dx, batch * t_, 0.0f);
}

// ---------------------------------------------------------------------------
// position embedding

PositionEmbeddingLayer::PositionEmbeddingLayer(std::string name, const Shape& input,
                                               std::size_t context, const ComputeContext& ctx)
    : Layer(std::move(name), input, input),
      ctx_(ctx),
      t_(input[0]),
      c_(input[1]),
      context_(context) {
  require_cpu(ctx, this->name(), "position_embedding");
}

std::vector<ParamDesc> PositionEmbeddingLayer::param_descs() const {
  return {{"weight", Shape{context_, c_}, kGpt2InitFanIn}};
}

void PositionEmbeddingLayer::bind(float* params, float* grads) {
  w_ = params;
  dw_ = grads;
}

void PositionEmbeddingLayer::forward(const float* x, float* y, std::size_t batch, bool) {
  const std::size_t n = t_ * c_;
  for (std::size_t b = 0; b < batch; ++b)
    for (std::size_t i = 0; i < n; ++i) y[b * n + i] = x[b * n + i] + w_[i];
}

void PositionEmbeddingLayer::backward(const float*, const float*, const float* dy, float* dx,
                                      std::size_t batch, bool accumulate) {
  const std::size_t n = t_ * c_;
  if (!accumulate) std::fill_n(dw_, context_ * c_, 0.0f);
  for (std::size_t b = 0; b < batch; ++b)
    for (std::size_t i = 0; i < n; ++i) dw_[i] += dy[b * n + i];
  if (dx != nullptr) std::copy_n(dy, batch * n, dx);
}

// ---------------------------------------------------------------------------
// layer_norm

LayerNormLayer::LayerNormLayer(std::string name, const Shape& input, float eps,
                               const ComputeContext& ctx, std::size_t max_batch)
    : Layer(std::move(name), input, input),
      ctx_(ctx),
      rows_(input.numel() / input[input.rank() - 1]),
      c_(input[input.rank() - 1]),
      eps_(eps),
      mean_(max_batch * rows_),
      rstd_(max_batch * rows_) {
  require_cpu(ctx, this->name(), "layer_norm");
}

std::vector<ParamDesc> LayerNormLayer::param_descs() const {
  return {{"weight", Shape{c_}, 0, 1.0f}, {"bias", Shape{c_}, 0, 0.0f}};
}

void LayerNormLayer::bind(float* params, float* grads) {
  w_ = params;
  b_ = params + c_;
  dw_ = grads;
  db_ = grads + c_;
}

void LayerNormLayer::forward(const float* x, float* y, std::size_t batch, bool) {
  const int c = static_cast<int>(c_);
  for (std::size_t r = 0; r < batch * rows_; ++r)
    kernels::layer_norm_row_forward(x + r * c_, w_, b_, c, eps_, y + r * c_, &mean_[r], &rstd_[r]);
}

void LayerNormLayer::backward(const float* x, const float*, const float* dy, float* dx,
                              std::size_t batch, bool accumulate) {
  if (!accumulate) std::fill_n(dw_, 2 * c_, 0.0f);  // weight and bias are adjacent
  const int c = static_cast<int>(c_);
  for (std::size_t r = 0; r < batch * rows_; ++r)
    kernels::layer_norm_row_backward(x + r * c_, w_, dy + r * c_, c, mean_[r], rstd_[r],
                                     dx ? dx + r * c_ : nullptr, dw_, db_);
}

// ---------------------------------------------------------------------------
// causal self-attention

CausalSelfAttentionLayer::CausalSelfAttentionLayer(std::string name, const Shape& input,
                                                   std::size_t heads, const ComputeContext& ctx,
                                                   std::size_t max_batch)
    : Layer(std::move(name), input, input),
      ctx_(ctx),
      t_(input[0]),
      c_(input[1]),
      heads_(heads),
      d_(input[1] / heads) {
  require_cpu(ctx, this->name(), "causal_self_attention");
  RT_CHECK(heads >= 1 && c_ % heads == 0, "layer '{}': width {} is not a multiple of {} heads",
           this->name(), c_, heads);
  (void)max_batch;  // workspaces grow with the batches seen (model show builds gpt2 cheaply)
}

std::vector<ParamDesc> CausalSelfAttentionLayer::param_descs() const {
  return {{"c_attn.weight", Shape{3 * c_, c_}, kGpt2InitFanIn},
          {"c_attn.bias", Shape{3 * c_}, 0},
          {"c_proj.weight", Shape{c_, c_}, kGpt2InitFanIn},
          {"c_proj.bias", Shape{c_}, 0}};
}

void CausalSelfAttentionLayer::bind(float* params, float* grads) {
  w_qkv_ = params;
  b_qkv_ = w_qkv_ + 3 * c_ * c_;
  w_o_ = b_qkv_ + 3 * c_;
  b_o_ = w_o_ + c_ * c_;
  dw_qkv_ = grads;
  db_qkv_ = dw_qkv_ + 3 * c_ * c_;
  dw_o_ = db_qkv_ + 3 * c_;
  db_o_ = dw_o_ + c_ * c_;
}

void CausalSelfAttentionLayer::forward(const float* x, float* y, std::size_t batch, bool) {
  const std::size_t rows = batch * t_, c3 = 3 * c_;
  if (qkv_.size() < rows * c3) {
    qkv_.assign(rows * c3, 0.0f);
    p_.assign(batch * heads_ * t_ * t_, 0.0f);
    o_.assign(rows * c_, 0.0f);
    d_o_.assign(rows * c_, 0.0f);
    d_qkv_.assign(rows * c3, 0.0f);
    d_p_.assign(t_ * t_, 0.0f);
  }
  const float scale = 1.0f / std::sqrt(static_cast<float>(d_));
  gemm(ctx_, false, true, rows, c3, c_, 1.0f, x, c_, w_qkv_, c_, 0.0f, qkv_.data(), c3);
  bias_add(ctx_, qkv_.data(), b_qkv_, rows, c3, 1);
  const int t = static_cast<int>(t_);
  for (std::size_t b = 0; b < batch; ++b)
    for (std::size_t h = 0; h < heads_; ++h) {
      const float* q = qkv_.data() + b * t_ * c3 + h * d_;
      const float* k = q + c_;
      const float* v = q + 2 * c_;
      float* p = p_.data() + (b * heads_ + h) * t_ * t_;
      // S = scale Q K^T (the whole square; the mask drops the upper triangle).
      gemm(ctx_, false, true, t_, t_, d_, scale, q, c3, k, c3, 0.0f, p, t_);
      for (int i = 0; i < t; ++i) kernels::causal_softmax_row(p + i * t_, i, t, p + i * t_);
      gemm(ctx_, false, false, t_, d_, t_, 1.0f, p, t_, v, c3, 0.0f,
           o_.data() + b * t_ * c_ + h * d_, c_);
    }
  gemm(ctx_, false, true, rows, c_, c_, 1.0f, o_.data(), c_, w_o_, c_, 0.0f, y, c_);
  bias_add(ctx_, y, b_o_, rows, c_, 1);
}

void CausalSelfAttentionLayer::backward(const float* x, const float*, const float* dy, float* dx,
                                        std::size_t batch, bool accumulate) {
  const std::size_t rows = batch * t_, c3 = 3 * c_;
  const float beta = accumulate ? 1.0f : 0.0f;
  const float scale = 1.0f / std::sqrt(static_cast<float>(d_));
  // Output projection: dWo = dy^T O, dbo = sum dy, dO = dy Wo.
  bias_grad(ctx_, dy, db_o_, rows, c_, 1, accumulate);
  gemm(ctx_, true, false, c_, c_, rows, 1.0f, dy, c_, o_.data(), c_, beta, dw_o_, c_);
  gemm(ctx_, false, false, rows, c_, c_, 1.0f, dy, c_, w_o_, c_, 0.0f, d_o_.data(), c_);
  const int t = static_cast<int>(t_);
  for (std::size_t b = 0; b < batch; ++b)
    for (std::size_t h = 0; h < heads_; ++h) {
      const std::size_t at = b * t_ * c3 + h * d_;
      const float* q = qkv_.data() + at;
      const float* k = q + c_;
      const float* v = q + 2 * c_;
      float* dq = d_qkv_.data() + at;
      float* dk = dq + c_;
      float* dv = dq + 2 * c_;
      const float* p = p_.data() + (b * heads_ + h) * t_ * t_;
      const float* d_o = d_o_.data() + b * t_ * c_ + h * d_;
      float* dp = d_p_.data();
      // dV = P^T dO; dP = dO V^T; dS = softmax'(dP) * scale; dQ = dS K; dK = dS^T Q.
      gemm(ctx_, true, false, t_, d_, t_, 1.0f, p, t_, d_o, c_, 0.0f, dv, c3);
      gemm(ctx_, false, true, t_, t_, d_, 1.0f, d_o, c_, v, c3, 0.0f, dp, t_);
      for (int i = 0; i < t; ++i)
        kernels::causal_softmax_row_backward(p + i * t_, dp + i * t_, i, t, scale, dp + i * t_);
      gemm(ctx_, false, false, t_, d_, t_, 1.0f, dp, t_, k, c3, 0.0f, dq, c3);
      gemm(ctx_, true, false, t_, d_, t_, 1.0f, dp, t_, q, c3, 0.0f, dk, c3);
    }
  // QKV projection: dWqkv = dqkv^T x, dbqkv = sum dqkv, dx = dqkv Wqkv.
  bias_grad(ctx_, d_qkv_.data(), db_qkv_, rows, c3, 1, accumulate);
  gemm(ctx_, true, false, c3, c_, rows, 1.0f, d_qkv_.data(), c3, x, c_, beta, dw_qkv_, c_);
  if (dx != nullptr)
    gemm(ctx_, false, false, rows, c_, c3, 1.0f, d_qkv_.data(), c3, w_qkv_, c_, 0.0f, dx, c_);
}

// ---------------------------------------------------------------------------
// tied language-model head

TiedLmHeadLayer::TiedLmHeadLayer(std::string name, const Shape& input, std::string embedding,
                                 std::size_t vocab, const ComputeContext& ctx)
    : Layer(std::move(name), input, Shape{input[0], vocab}),
      ctx_(ctx),
      embedding_(std::move(embedding)),
      t_(input[0]),
      c_(input[1]),
      vocab_(vocab) {
  require_cpu(ctx, this->name(), "lm_head");
}

void TiedLmHeadLayer::bind(float* params, float* grads) {
  e_ = params;
  de_ = grads;
}

void TiedLmHeadLayer::forward(const float* x, float* y, std::size_t batch, bool) {
  RT_CHECK(e_ != nullptr, "layer '{}': not tied to the embedding '{}'", name(), embedding_);
  gemm(ctx_, false, true, batch * t_, vocab_, c_, 1.0f, x, c_, e_, c_, 0.0f, y, vocab_);
}

void TiedLmHeadLayer::backward(const float* x, const float*, const float* dy, float* dx,
                               std::size_t batch, bool accumulate) {
  const std::size_t rows = batch * t_;
  // dE = dy^T x (written first: the embedding adds its own after), dx = dy E.
  gemm(ctx_, true, false, vocab_, c_, rows, 1.0f, dy, vocab_, x, c_, accumulate ? 1.0f : 0.0f, de_,
       c_);
  if (dx != nullptr)
    gemm(ctx_, false, false, rows, c_, vocab_, 1.0f, dy, vocab_, e_, c_, 0.0f, dx, c_);
}

}  // namespace ringtrain
