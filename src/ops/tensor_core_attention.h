// Causal self-attention on tensor cores: cuDNN's fused flash attention
// (SDPA, ops/cudnn_graph.h) over causal_self_attention's fp32 qkv rows, for
// a GPU context of --precision bf16|fp16. Q, K and V are read by strides from
// one 16-bit copy of the fused qkv buffer (no per-head copies), O comes back
// 16-bit and is widened into the layer's fp32 O; backward narrows dO and
// widens dQKV. The casts move [T, 4C] values a sample where the attention
// itself reads the whole T x T square on the unfused path; the layer's stored
// path has none: its GEMMs write the 16-bit qkv and dO here and read the
// 16-bit O and dQKV in place.
//
// The layers of one context run one after another on its stream, so they
// share what holds nothing between calls: cuDNN's workspace (its deterministic
// backward's dP alone is batch x heads x T x T x 2 bytes, 384 MiB for gpt2 at
// 16 x 1024), the backward's 16-bit dO and dQKV, and the graphs of each shape,
// built once (gpt2's 12 layers are one shape). Each layer keeps its 16-bit qkv
// and O, which backward reads.
//
// No attention dropout (the layer keeps its own paths where it is on), no CPU
// form: ringtrain's fused kernel (ops/fused_attention.h) stays the fallback,
// and the CPU's layer is the reference, within 16-bit tolerance of this
// (gpu_cudnn_graph_test).
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "ringtrain/core/buffer_view.h"
#include "ringtrain/ops/compute_context.h"
#include "ringtrain/tensor/tensor.h"

namespace ringtrain {

namespace detail {
class AttentionGraphs;
}

class TensorCoreAttention {
 public:
  // Null where it cannot run: a CPU context, fp32 precision, or no
  // deterministic cuDNN engine for the shape at max_batch; *why_not says why.
  static std::unique_ptr<TensorCoreAttention> make(const ComputeContext& ctx, std::size_t t,
                                                   std::size_t c, std::size_t heads,
                                                   std::size_t max_batch, std::string* why_not);
  ~TensorCoreAttention();
  TensorCoreAttention(const TensorCoreAttention&) = delete;
  TensorCoreAttention& operator=(const TensorCoreAttention&) = delete;

  // qkv [batch, T, 3C] fp32 -> o [batch, T, C] fp32 (null: only the 16-bit
  // O, o16) and the row statistics [batch, heads, T] that backward reads.
  // Keeps the 16-bit qkv and O.
  void forward(std::size_t batch, const float* qkv, float* o, float* stats);
  // d_qkv [batch, T, 3C] fp32 (overwritten; null: only the 16-bit d_qkv16)
  // from d_o and the last forward's.
  void backward(std::size_t batch, const float* d_o, const float* stats, float* d_qkv);
  // The last forward's 16-bit O and the context's last backward's 16-bit
  // dQKV (shared: read it before another layer's backward), for a caller
  // whose products read them in place (the layer's stored path).
  BufferView o16(std::size_t batch) const;
  BufferView d_qkv16(std::size_t batch) const;
  // The stored path's forms, with no cast: the caller's GEMMs write the
  // 16-bit qkv (qkv16, bias added) before forward_stored and the 16-bit dO
  // (d_o16, shared as d_qkv16 is) before backward_stored; O and dQKV stay
  // 16-bit (o16, d_qkv16).
  BufferView qkv16(std::size_t batch) const;
  BufferView d_o16(std::size_t batch) const;
  void forward_stored(std::size_t batch, float* stats);
  void backward_stored(std::size_t batch, const float* stats);
  // The engines cuDNN built (for bench step --layers).
  std::string describe() const;

 private:
  struct Shared;  // the context's: graphs by shape, workspace, dO and dQKV
  struct Entry;
  TensorCoreAttention(const ComputeContext& ctx, std::size_t t, std::size_t c, std::size_t heads,
                      std::size_t max_batch, std::shared_ptr<Shared> shared);
  static std::shared_ptr<Shared> shared_of(const ComputeContext& ctx);
  const detail::AttentionGraphs& graphs(std::size_t batch);

  const ComputeContext& ctx_;
  std::size_t t_, c_, heads_, max_batch_;
  std::shared_ptr<Shared> shared_;
  std::vector<Entry> entries_;  // the batch sizes this layer has run
  Tensor qkv16_, o16_;
};

}  // namespace ringtrain
