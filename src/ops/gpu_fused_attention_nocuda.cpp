// CPU-only build: fused attention cannot run on a GPU (ComputeContext::create
// refuses a CUDA device first; this guards a bypass).
#include "ops/gpu_fused_attention.h"
#include "ringtrain/core/check.h"

namespace ringtrain::detail {

void gpu_fused_attention_forward(void*, const FusedAttentionShape&, const float*, float*, float*) {
  RT_CHECK(false,
           "cannot run fused attention on a CUDA device: this ringtrain was built without "
           "CUDA");
}
void gpu_fused_attention_backward(void*, const FusedAttentionShape&, const float*, const float*,
                                  const float*, const float*, float*, float*) {
  RT_CHECK(false,
           "cannot run fused attention on a CUDA device: this ringtrain was built without "
           "CUDA");
}

}  // namespace ringtrain::detail
