// Host-side launchers of kernels/flash_attention.cu: fused causal attention
// over qkv rows [batch, T, 3C] (the layout of ringtrain/ops/fused_attention.h).
// Streams travel as void*.
#pragma once

#include <cstddef>
#include <cstdint>

namespace ringtrain::kernels {

struct FlashAttentionArgs {
  std::size_t batch, t, c, heads;
  float dropout;  // 0: none
  std::uint64_t node_key;
};

// o [batch, T, C] and lse [batch, heads, T].
void flash_attention_forward_cuda(const FlashAttentionArgs& a, const float* qkv, float* o,
                                  float* lse, void* stream);
// d_qkv [batch, T, 3C] (every element written); delta [batch, heads, T] is
// workspace.
void flash_attention_backward_cuda(const FlashAttentionArgs& a, const float* qkv, const float* o,
                                   const float* d_o, const float* lse, float* delta, float* d_qkv,
                                   void* stream);

}  // namespace ringtrain::kernels
