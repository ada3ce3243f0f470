// Fused causal self-attention (flash-attention style) over the per-sample
// qkv rows of a causal_self_attention layer: [batch, T, 3C], Q at column
// h*d, K at C + h*d, V at 2C + h*d for head h of d = C / heads. The forward
// writes O [batch, T, C] and each row's log-sum-exp L [batch, heads, T]; it
// walks the keys in tiles with an online softmax and never forms the T x T
// matrix. The backward recomputes P from Q, K and L, one pass over key tiles
// for dK and dV and one over query tiles for dQ, each value summed in a fixed
// order (no float atomics), so a step repeats bit for bit.
//
// On a GPU these are CUDA kernels; on the CPU the same tiled algorithm runs
// through the same tile arithmetic (kernels/flash_attention.cuh), as the
// reference the GPU's arithmetic is tested by.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "ringtrain/ops/compute_context.h"

namespace ringtrain {

struct FusedAttentionShape {
  std::size_t batch = 0, t = 0, c = 0, heads = 0;
  // Attention dropout (training only; 0: none) with the node's dropout key:
  // head h's mask is keyed by kernels::attention_head_key(node_key, h), the
  // same mask the unfused path draws.
  float dropout = 0.0f;
  std::uint64_t node_key = 0;
};

// The CPU's tile sizes (queries x keys); the GPU's are fixed by its kernels.
// Tests make them small so that T spans several, with a partial last one.
struct AttentionTiles {
  std::size_t rows = 64, cols = 64;
};

// o [batch, T, C] and lse [batch, heads, T] from qkv. Head widths above
// kernels::kFlashMaxHeadDim (128) are an Error naming `layer`.
void fused_attention_forward(const ComputeContext& ctx, const FusedAttentionShape& s,
                             const float* qkv, float* o, float* lse, const std::string& layer,
                             AttentionTiles tiles = {});
// d_qkv [batch, T, 3C] (overwritten) from d_o and the forward's qkv, o and
// lse; delta [batch, heads, T] is workspace (D = rowsum(dO o O)).
void fused_attention_backward(const ComputeContext& ctx, const FusedAttentionShape& s,
                              const float* qkv, const float* o, const float* d_o, const float* lse,
                              float* delta, float* d_qkv, AttentionTiles tiles = {});

}  // namespace ringtrain
