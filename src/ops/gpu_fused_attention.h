// The GPU half of ringtrain/ops/fused_attention.h (src/ops/cuda; a CPU-only
// build refuses it in gpu_fused_attention_nocuda.cpp).
#pragma once

#include "ringtrain/ops/fused_attention.h"

namespace ringtrain::detail {

void gpu_fused_attention_forward(void* stream, const FusedAttentionShape& s, const float* qkv,
                                 float* o, float* lse);
void gpu_fused_attention_backward(void* stream, const FusedAttentionShape& s, const float* qkv,
                                  const float* o, const float* d_o, const float* lse, float* delta,
                                  float* d_qkv);

}  // namespace ringtrain::detail
