// A layer of a GPT-2 class language model over per-sample [T, C] rows. It
// runs on the CPU or a GPU through the ops of ringtrain/ops/transformer_ops.h
// and the (batched) GEMM, the same code for both.
// The row arithmetic lives in kernels/causal_attention.cuh, shared by the
// CPU loops and the CUDA kernels.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "model/layer.h"
#include "model/layer_workspace.h"
#include "ops/tensor_core_attention.h"

namespace ringtrain {

// Which attention the layer runs. automatic: on a GPU under --precision
// bf16|fp16 without attention dropout, cuDNN's flash attention on tensor cores
// (ops/tensor_core_attention.h) where cuDNN has an engine for the shape;
// otherwise the unfused path (cuBLAS GEMMs around a row softmax) where its
// score matrices fit kUnfusedScoreBudget, the fused kernel on a GPU beyond
// that, and the plain unfused one on the CPU. The environment variable
// RINGTRAIN_ATTENTION=sdpa|fused|unfused chooses instead (for comparisons; on
// the CPU `fused` runs the GPU's tiled algorithm as loops, and `sdpa` where it
// cannot run is an Error saying why).
enum class AttentionKernel { automatic, unfused, fused, sdpa };

// The unfused path's P per layer ([heads, batch, T, T] floats) that the
// automatic choice accepts: 1 GiB (gpt2 at 16 x 1024 needs 768 MiB a layer,
// 9 GiB over its 12). Why not always fused: the fused kernel has no tensor
// cores, and on an H200 gpt2's step ran at 20.8k tokens/s fused against
// 119.6k unfused (docs/gpu.md, round 4); it stays for what does not fit.
inline constexpr std::size_t kUnfusedScoreBudget = std::size_t{1} << 30;

// automatic's choice without the environment: fused only on a GPU and only
// when the unfused P of `score_bytes` exceeds kUnfusedScoreBudget.
bool attention_fused_by_default(bool on_gpu, std::size_t score_bytes);

// Causal multi-head self-attention on [T, C] with `heads` heads of C/heads:
// qkv = x Wqkv^T + b (GPT-2's c_attn, [3C, C]), per head P = causal
// softmax(Q K^T / sqrt(d)), O = dropout(P) V, y = O Wo^T + bo (c_proj).
// Unfused, forward keeps qkv, P ([heads, batch, T, T]) and O for backward;
// the GEMMs run per head, batched over the samples. Fused
// (ringtrain/ops/fused_attention.h), it keeps qkv, O and each row's
// log-sum-exp ([batch, heads, T]) and no T x T matrix. Attention dropout
// (GPT-2's attn_dropout, probability `dropout`, training only) draws its mask
// from the counter-based hash of kernels/dropout.cuh keyed by (seed, rank,
// step, node, head), the same on both paths, so backward recomputes it and a
// resume repeats it.
//
// With cuDNN's attention (a GPU under bf16/fp16, no attention dropout) it also
// stores its activations: x, y and their gradients are the model's 16-bit
// buffers, its products read its own 16-bit copies of W_qkv and W_o
// (narrowed once per forward) and the 16-bit O and dQKV in place, and write
// qkv, y, dO and dx in 16 bits through cuBLASLt (the biases added in the
// epilogues, each output rounded once; the bias gradients from the
// weight-gradient epilogues). Elsewhere the model's adapter runs it in fp32.
class CausalSelfAttentionLayer final : public Layer,
                                       public DescribesKernels,
                                       public StoresActivations,
                                       public IgnoresOutputInBackward {
 public:
  CausalSelfAttentionLayer(std::string name, const Shape& input, std::size_t heads,
                           const ComputeContext& ctx, std::size_t max_batch, float dropout = 0.0f,
                           std::size_t index = 0, const DropoutContext* dropout_context = nullptr,
                           AttentionKernel kernel = AttentionKernel::automatic);
  bool fused() const { return fused_; }
  bool tensor_cores() const { return sdpa_ != nullptr; }
  float attention_dropout() const { return dropout_; }
  std::string describe_kernels() const override;
  bool stores_activations() const override { return sdpa_ != nullptr; }
  void forward_stored(const std::vector<BufferView>& xs, BufferView y, std::size_t batch,
                      bool training) override;
  void backward_stored(const std::vector<BufferView>& xs, BufferView y, BufferView dy,
                       const std::vector<BufferView>& dxs, std::size_t batch,
                       bool accumulate) override;
  bool matmul_weights() const override { return true; }
  std::vector<ParamDesc> param_descs() const override;
  void bind(float* params, float* grads) override;
  void forward(const float* x, float* y, std::size_t batch, bool training) override;
  void backward(const float* x, const float* y, const float* dy, float* dx, std::size_t batch,
                bool accumulate) override;

 private:
  std::uint64_t node_key() const;
  // qkv_, d_qkv_, o_ and d_o_ for the fp32 interface (once).
  void make_fp32_workspaces();
  DType on_grid_products() const;
  void forward_unfused(float* qkv, float* o, std::size_t batch);
  void backward_unfused(const float* qkv, const float* d_o, float* d_qkv, std::size_t batch);
  const ComputeContext& ctx_;
  std::size_t t_, c_, heads_, d_;
  float dropout_;
  std::size_t index_;
  const DropoutContext* dropout_context_;
  bool fused_;
  std::unique_ptr<TensorCoreAttention> sdpa_;  // null: ringtrain's own kernels
  std::string sdpa_refused_;                   // why sdpa_ is null where the choice allowed it
  Tensor w_qkv16_, w_o16_;  // the stored path's 16-bit weights, made at each forward
  bool dropped_ = false;    // the last forward applied the attention dropout
  // qkv and O per sample. Unfused: P per sample (all heads); one head's
  // worth of dropped P and of dP (reused head after head). Fused: each row's
  // log-sum-exp and the backward's D = rowsum(dO o O), per head.
  LayerWorkspace qkv_, o_, d_o_, d_qkv_, p_, p_drop_, d_p_, lse_, delta_;
  std::size_t max_batch_ = 0;
  bool fp32_workspaces_ = false;  // qkv_, o_, d_o_, d_qkv_ made
  float *w_qkv_ = nullptr, *b_qkv_ = nullptr, *w_o_ = nullptr, *b_o_ = nullptr;
  float *dw_qkv_ = nullptr, *db_qkv_ = nullptr, *dw_o_ = nullptr, *db_o_ = nullptr;
};

}  // namespace ringtrain
