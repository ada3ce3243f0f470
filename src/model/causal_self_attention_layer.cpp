// The unfused path forms the whole T x T score matrix and masks it (cuBLAS
// strided-batched GEMMs around a warp-per-row causal softmax on a GPU): the
// CPU's plain, correct implementation, and the GPU's default where P fits
// kUnfusedScoreBudget (cuBLAS's tensor cores). The fused path never forms it:
// ringtrain/ops/fused_attention.h.
#include "model/causal_self_attention_layer.h"

#include <cmath>
#include <cstdlib>
#include <string_view>

#include "kernels/dropout.cuh"
#include "kernels/flash_attention.cuh"
#include "model/gpt2_init.h"
#include "ringtrain/core/check.h"
#include "ringtrain/ops/bias.h"
#include "ringtrain/ops/dropout.h"
#include "ringtrain/ops/fused_attention.h"
#include "ringtrain/ops/gemm.h"
#include "ringtrain/ops/precision.h"
#include "ringtrain/ops/transformer_ops.h"

namespace ringtrain {

namespace {

// automatic resolved by RINGTRAIN_ATTENTION where it is set.
AttentionKernel requested(AttentionKernel kernel, const std::string& layer) {
  if (kernel != AttentionKernel::automatic) return kernel;
  const char* env = std::getenv("RINGTRAIN_ATTENTION");
  if (env == nullptr || *env == '\0') return kernel;
  const std::string_view v(env);
  RT_CHECK(v == "fused" || v == "unfused" || v == "sdpa",
           "layer '{}': RINGTRAIN_ATTENTION='{}' is none of 'sdpa', 'fused', 'unfused'", layer, v);
  return v == "sdpa"    ? AttentionKernel::sdpa
         : v == "fused" ? AttentionKernel::fused
                        : AttentionKernel::unfused;
}

// automatic: attention_fused_by_default; sdpa's fallback (where it is only
// preferred) likewise.
bool use_fused(AttentionKernel kernel, const ComputeContext& ctx, std::size_t score_bytes) {
  if (kernel == AttentionKernel::automatic || kernel == AttentionKernel::sdpa)
    return attention_fused_by_default(ctx.is_cuda(), score_bytes);
  return kernel == AttentionKernel::fused;
}

// cuDNN's attention where the choice allows it and it can run; sdpa asked for
// explicitly and unavailable is an Error naming why.
// *why_not: why it does not run where the choice allowed it (for the kernels
// column: a GPU run must not time the fallback as SDPA unawares).
std::unique_ptr<TensorCoreAttention> make_sdpa(AttentionKernel kernel, const ComputeContext& ctx,
                                               const std::string& layer, std::size_t t,
                                               std::size_t c, std::size_t heads,
                                               std::size_t max_batch, float dropout,
                                               std::string* why_not) {
  if (kernel != AttentionKernel::automatic && kernel != AttentionKernel::sdpa) return nullptr;
  std::string why;
  std::unique_ptr<TensorCoreAttention> a;
  if (dropout > 0.0f)
    why = "attention dropout is on (gpt2:dropout=0 turns it off)";
  else
    a = TensorCoreAttention::make(ctx, t, c, heads, max_batch, &why);
  RT_CHECK(a != nullptr || kernel != AttentionKernel::sdpa,
           "layer '{}': RINGTRAIN_ATTENTION=sdpa, but cuDNN's attention cannot run here: {}", layer,
           why);
  if (a == nullptr && ctx.is_cuda()) *why_not = std::move(why);
  return a;
}

}  // namespace

bool attention_fused_by_default(bool on_gpu, std::size_t score_bytes) {
  return on_gpu && score_bytes > kUnfusedScoreBudget;
}

// With cuDNN's attention, O and dQKV come back from 16-bit tensors, so every
// product of the layer has both operands on the --precision grid and may run
// on 16-bit tensor cores (gemm.h); ringtrain's own attention leaves them fp32.
DType CausalSelfAttentionLayer::on_grid_products() const {
  return sdpa_ ? ctx_.precision() : DType::f32;
}

std::string CausalSelfAttentionLayer::describe_kernels() const {
  if (sdpa_)
    return sdpa_->describe() +
           "; projections: cublasLt, qkv and y with the bias epilogue, dWs with the "
           "bias-gradient epilogue (BGRADB), dO and dx written in 16 bits";
  const std::string why =
      sdpa_refused_.empty() ? std::string() : "; cuDNN's SDPA does not run: " + sdpa_refused_;
  return (fused_ ? "ringtrain fused attention (no tensor cores)"
                 : "unfused: GEMMs around a causal row softmax") +
         why;
}

CausalSelfAttentionLayer::CausalSelfAttentionLayer(std::string name, const Shape& input,
                                                   std::size_t heads, const ComputeContext& ctx,
                                                   std::size_t max_batch, float dropout,
                                                   std::size_t index,
                                                   const DropoutContext* dropout_context,
                                                   AttentionKernel kernel)
    : Layer(std::move(name), input, input),
      ctx_(ctx),
      t_(input[0]),
      c_(input[1]),
      heads_(heads),
      d_(heads > 0 ? input[1] / heads : 0),
      dropout_(dropout),
      index_(index),
      dropout_context_(dropout_context) {
  RT_CHECK(heads >= 1 && c_ % heads == 0, "layer '{}': width {} is not a multiple of {} heads",
           this->name(), c_, heads);
  RT_CHECK(dropout >= 0.0f && dropout < 1.0f && (dropout == 0.0f || dropout_context != nullptr),
           "layer '{}': attention dropout {} is outside [0, 1)", this->name(), dropout);
  const AttentionKernel choice = requested(kernel, this->name());
  sdpa_ = make_sdpa(choice, ctx, this->name(), t_, c_, heads_, max_batch, dropout, &sdpa_refused_);
  fused_ = sdpa_ == nullptr &&
           use_fused(choice, ctx, sizeof(float) * heads * max_batch * input[0] * input[0]);
  const std::size_t tt = t_ * t_;
  max_batch_ = max_batch;
  // With cuDNN's attention the model runs the stored path, whose qkv, O, dO
  // and dQKV are TensorCoreAttention's 16-bit buffers only: the fp32 copies
  // that the fp32 interface needs are made on its first call (the layer
  // tests'), not for every model (gpt2 at 16 x 1024 tokens: 400 MB a layer).
  if (!sdpa_) make_fp32_workspaces();
  if (sdpa_) {  // cuDNN's row statistics; no T x T matrix
    lse_ = LayerWorkspace(ctx, heads_ * t_, max_batch);
    w_qkv16_ = Tensor::empty({3 * c_ * c_}, ctx.precision(), ctx.device());
    w_o16_ = Tensor::empty({c_ * c_}, ctx.precision(), ctx.device());
  } else if (fused_) {
    lse_ = LayerWorkspace(ctx, heads_ * t_, max_batch);
    delta_ = LayerWorkspace(ctx, heads_ * t_, max_batch);
  } else {
    p_ = LayerWorkspace(ctx, heads_ * tt, max_batch);
    d_p_ = LayerWorkspace(ctx, tt, max_batch);
    p_drop_ = LayerWorkspace(ctx, dropout > 0.0f ? tt : 0, max_batch);
  }
}

void CausalSelfAttentionLayer::make_fp32_workspaces() {
  if (fp32_workspaces_) return;
  qkv_ = LayerWorkspace(ctx_, t_ * 3 * c_, max_batch_);
  d_qkv_ = LayerWorkspace(ctx_, t_ * 3 * c_, max_batch_);
  o_ = LayerWorkspace(ctx_, t_ * c_, max_batch_);
  d_o_ = LayerWorkspace(ctx_, t_ * c_, max_batch_);
  fp32_workspaces_ = true;
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

// The node's dropout key (as a dropout layer's); each head mixes in its index
// (kernels::attention_head_key), on both paths.
std::uint64_t CausalSelfAttentionLayer::node_key() const {
  const DropoutContext& c = *dropout_context_;
  return dropout_mask_key(c.seed, c.rank, c.step, index_);
}

void CausalSelfAttentionLayer::forward(const float* x, float* y, std::size_t batch, bool training) {
  const std::size_t rows = batch * t_, c3 = 3 * c_;
  make_fp32_workspaces();
  float* qkv = qkv_.get(batch, name());
  float* o = o_.get(batch, name());
  dropped_ = training && dropout_ > 0.0f;
  // x and the weights are stored on the --precision grid: 16-bit inputs on a
  // GPU (gemm.h). O, Q, K, V, P are the layer's own fp32 buffers, off the
  // grid, so their products stay fp32.
  gemm(ctx_, false, true, rows, c3, c_, 1.0f, x, c_, w_qkv_, c_, 0.0f, qkv, c3, ctx_.precision());
  bias_add(ctx_, qkv, b_qkv_, rows, c3, 1);
  if (sdpa_) {
    sdpa_->forward(batch, qkv, o, lse_.get(batch, name()));
  } else if (fused_) {
    const FusedAttentionShape s{
        batch, t_, c_, heads_, dropped_ ? dropout_ : 0.0f, dropped_ ? node_key() : 0};
    fused_attention_forward(ctx_, s, qkv, o, lse_.get(batch, name()), name());
  } else {
    forward_unfused(qkv, o, batch);
  }
  // cuDNN's O is 16-bit, widened: on the grid, so c_proj runs on tensor cores.
  gemm(ctx_, false, true, rows, c_, c_, 1.0f, o, c_, w_o_, c_, 0.0f, y, c_, on_grid_products());
  bias_add(ctx_, y, b_o_, rows, c_, 1);
}

void CausalSelfAttentionLayer::forward_unfused(float* qkv, float* o, std::size_t batch) {
  const std::size_t c3 = 3 * c_, tt = t_ * t_;
  float* p = p_.get(batch, name());
  const float scale = 1.0f / std::sqrt(static_cast<float>(d_));
  const std::uint64_t key = dropped_ ? node_key() : 0;
  // Per head h, over the samples b: S[h, b] = scale Q K^T (the whole square;
  // the causal softmax masks the upper triangle), then O = P V.
  for (std::size_t h = 0; h < heads_; ++h) {
    const float* q = qkv + h * d_;
    gemm_strided_batched(ctx_, false, true, t_, t_, d_, scale, q, c3, t_ * c3, q + c_, c3, t_ * c3,
                         0.0f, p + h * batch * tt, t_, tt, batch);
  }
  causal_softmax_forward(ctx_, p, p, heads_ * batch, t_);
  for (std::size_t h = 0; h < heads_; ++h) {
    const float* ph = p + h * batch * tt;
    if (dropped_) {
      float* pd = p_drop_.get(batch, name());
      dropout_apply(ctx_, ph, pd, batch * tt, kernels::attention_head_key(key, h), dropout_);
      ph = pd;
    }
    gemm_strided_batched(ctx_, false, false, t_, d_, t_, 1.0f, ph, t_, tt, qkv + 2 * c_ + h * d_,
                         c3, t_ * c3, 0.0f, o + h * d_, c_, t_ * c_, batch);
  }
}

void CausalSelfAttentionLayer::backward(const float* x, const float*, const float* dy, float* dx,
                                        std::size_t batch, bool accumulate) {
  const std::size_t rows = batch * t_, c3 = 3 * c_;
  const float beta = accumulate ? 1.0f : 0.0f;
  make_fp32_workspaces();
  const float* qkv = qkv_.get(batch, name());
  const float* o = o_.get(batch, name());
  float* d_qkv = d_qkv_.get(batch, name());
  float* d_o = d_o_.get(batch, name());
  // Output projection: dWo = dy^T O, dbo = sum dy, dO = dy Wo.
  bias_grad(ctx_, dy, db_o_, rows, c_, 1, accumulate);
  gemm(ctx_, true, false, c_, c_, rows, 1.0f, dy, c_, o, c_, beta, dw_o_, c_, on_grid_products());
  gemm(ctx_, false, false, rows, c_, c_, 1.0f, dy, c_, w_o_, c_, 0.0f, d_o, c_, ctx_.precision());
  if (sdpa_) {
    sdpa_->backward(batch, d_o, lse_.get(batch, name()), d_qkv);
  } else if (fused_) {
    const FusedAttentionShape s{
        batch, t_, c_, heads_, dropped_ ? dropout_ : 0.0f, dropped_ ? node_key() : 0};
    fused_attention_backward(ctx_, s, qkv, o, d_o, lse_.get(batch, name()),
                             delta_.get(batch, name()), d_qkv);
  } else {
    backward_unfused(qkv, d_o, d_qkv, batch);
  }
  // QKV projection: dWqkv = dqkv^T x, dbqkv = sum dqkv, dx = dqkv Wqkv.
  bias_grad(ctx_, d_qkv, db_qkv_, rows, c3, 1, accumulate);
  gemm(ctx_, true, false, c3, c_, rows, 1.0f, d_qkv, c3, x, c_, beta, dw_qkv_, c_,
       on_grid_products());
  if (dx != nullptr)
    gemm(ctx_, false, false, rows, c_, c3, 1.0f, d_qkv, c3, w_qkv_, c_, 0.0f, dx, c_,
         on_grid_products());
}

void CausalSelfAttentionLayer::backward_unfused(const float* qkv, const float* d_o, float* d_qkv,
                                                std::size_t batch) {
  const std::size_t c3 = 3 * c_, tt = t_ * t_;
  const float scale = 1.0f / std::sqrt(static_cast<float>(d_));
  const float* p = p_.get(batch, name());
  float* dp = d_p_.get(batch, name());
  const std::uint64_t key = dropped_ ? node_key() : 0;
  for (std::size_t h = 0; h < heads_; ++h) {
    const float* q = qkv + h * d_;
    const float* k = q + c_;
    const float* v = q + 2 * c_;
    float* dq = d_qkv + h * d_;
    float* dk = dq + c_;
    float* dv = dq + 2 * c_;
    const float* ph = p + h * batch * tt;
    const float* d_oh = d_o + h * d_;
    float* pd = dropped_ ? p_drop_.get(batch, name()) : nullptr;
    const std::uint64_t head_key = kernels::attention_head_key(key, h);
    // The dropped P that forward multiplied V by, recomputed from its key.
    if (dropped_) dropout_apply(ctx_, ph, pd, batch * tt, head_key, dropout_);
    // dV = Pd^T dO; dPd = dO V^T; dP = mask * dPd; dS = softmax'(dP) * scale;
    // dQ = dS K; dK = dS^T Q.
    gemm_strided_batched(ctx_, true, false, t_, d_, t_, 1.0f, dropped_ ? pd : ph, t_, tt, d_oh, c_,
                         t_ * c_, 0.0f, dv, c3, t_ * c3, batch);
    gemm_strided_batched(ctx_, false, true, t_, t_, d_, 1.0f, d_oh, c_, t_ * c_, v, c3, t_ * c3,
                         0.0f, dp, t_, tt, batch);
    const float* dp_in = dp;
    if (dropped_) {
      dropout_apply(ctx_, dp, pd, batch * tt, head_key, dropout_);
      dp_in = pd;
    }
    causal_softmax_backward(ctx_, ph, dp_in, dp, batch, t_, scale);
    gemm_strided_batched(ctx_, false, false, t_, d_, t_, 1.0f, dp, t_, tt, k, c3, t_ * c3, 0.0f, dq,
                         c3, t_ * c3, batch);
    gemm_strided_batched(ctx_, true, false, t_, d_, t_, 1.0f, dp, t_, tt, q, c3, t_ * c3, 0.0f, dk,
                         c3, t_ * c3, batch);
  }
}

// The stored path (cuDNN's attention only): the six products on tensor
// cores from 16-bit operands in place, through cuBLASLt (gemm.h:
// gemm_stored_epilogue), each writing its 16-bit output itself, rounded once: qkv
// with its bias added in the GEMM's epilogue, straight into the 16-bit
// buffer cuDNN's attention reads; y likewise with b_o; dO into the buffer
// cuDNN's backward reads; dx in dx's dtype. The bias gradients come from the
// weight-gradient GEMMs' epilogues. No fp32 copy of qkv, y, dO or dx.
void CausalSelfAttentionLayer::forward_stored(const std::vector<BufferView>& xs, BufferView y,
                                              std::size_t batch, bool) {
  const std::size_t rows = batch * t_, c3 = 3 * c_;
  const BufferView& x = xs.at(0);
  const Device d = ctx_.device();
  dropped_ = false;  // sdpa_ exists only without attention dropout
  convert_storage(ctx_, w_qkv16_.buffer(), view_of(w_qkv_, c3 * c_, d));
  convert_storage(ctx_, w_o16_.buffer(), view_of(w_o_, c_ * c_, d));
  gemm_stored_epilogue(ctx_, false, true, rows, c3, c_, x, c_, w_qkv16_.buffer(), c_, 0.0f,
                       sdpa_->qkv16(batch), c3, b_qkv_);
  sdpa_->forward_stored(batch, lse_.get(batch, name()));
  gemm_stored_epilogue(ctx_, false, true, rows, c_, c_, sdpa_->o16(batch), c_, w_o16_.buffer(), c_,
                       0.0f, y, c_, b_o_);
}

void CausalSelfAttentionLayer::backward_stored(const std::vector<BufferView>& xs, BufferView,
                                               BufferView dy, const std::vector<BufferView>& dxs,
                                               std::size_t batch, bool accumulate) {
  const std::size_t rows = batch * t_, c3 = 3 * c_;
  const float beta = accumulate ? 1.0f : 0.0f;
  const BufferView& x = xs.at(0);
  const BufferView& dx = dxs.at(0);
  const Device d = ctx_.device();
  // Output projection: dWo = dyᵀ O with dbo = sum dy in its epilogue (c_ and
  // 3c_ are far below the staging scratch that accumulation needs), dO = dy Wo.
  gemm_stored_epilogue(ctx_, true, false, c_, c_, rows, dy, c_, sdpa_->o16(batch), c_, beta,
                       view_of(dw_o_, c_ * c_, d), c_, nullptr, db_o_, accumulate);
  gemm_stored_epilogue(ctx_, false, false, rows, c_, c_, dy, c_, w_o16_.buffer(), c_, 0.0f,
                       sdpa_->d_o16(batch), c_);
  sdpa_->backward_stored(batch, lse_.get(batch, name()));
  // QKV projection from the 16-bit dQKV: dWqkv = dQKVᵀ x with dbqkv, dx = dQKV Wqkv.
  const BufferView d_qkv16 = sdpa_->d_qkv16(batch);
  gemm_stored_epilogue(ctx_, true, false, c3, c_, rows, d_qkv16, c3, x, c_, beta,
                       view_of(dw_qkv_, c3 * c_, d), c_, nullptr, db_qkv_, accumulate);
  if (dx.ptr == nullptr) return;
  gemm_stored_epilogue(ctx_, false, false, rows, c_, c3, d_qkv16, c3, w_qkv16_.buffer(), c_, 0.0f,
                       dx, c_);
}

}  // namespace ringtrain
