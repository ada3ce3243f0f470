// The GPU half of ringtrain/ops/fused_attention.h: forwards to the kernels of
// kernels/flash_attention.h on the context's stream.
#include "ops/gpu_fused_attention.h"
#include "kernels/flash_attention.h"

namespace ringtrain::detail {

namespace {
kernels::FlashAttentionArgs args_of(const FusedAttentionShape& s) {
  return {s.batch, s.t, s.c, s.heads, s.dropout, s.node_key};
}
}  // namespace

void gpu_fused_attention_forward(void* stream, const FusedAttentionShape& s, const float* qkv,
                                 float* o, float* lse) {
  kernels::flash_attention_forward_cuda(args_of(s), qkv, o, lse, stream);
}
void gpu_fused_attention_backward(void* stream, const FusedAttentionShape& s, const float* qkv,
                                  const float* o, const float* d_o, const float* lse, float* delta,
                                  float* d_qkv) {
  kernels::flash_attention_backward_cuda(args_of(s), qkv, o, d_o, lse, delta, d_qkv, stream);
}

}  // namespace ringtrain::detail
