#include "ringtrain/ops/bias.h"

#include "kernels/bias.cuh"
#include "ops/gpu_ops.h"

namespace ringtrain {

void bias_add(const ComputeContext& ctx, float* y, const float* bias, std::size_t outer,
              std::size_t channels, std::size_t inner) {
  if (ctx.is_cuda()) return detail::gpu_bias_add(ctx.stream(), y, bias, outer, channels, inner);
  for (std::size_t o = 0; o < outer; ++o) {
    float* __restrict__ row = y + o * channels * inner;
    if (inner == 1) {
      for (std::size_t c = 0; c < channels; ++c)
        row[c] = kernels::bias_add_element(row[c], bias[c]);
      continue;
    }
    for (std::size_t c = 0; c < channels; ++c) {
      float* __restrict__ plane = row + c * inner;
      const float b = bias[c];
      for (std::size_t i = 0; i < inner; ++i) plane[i] = kernels::bias_add_element(plane[i], b);
    }
  }
}

void bias_grad(const ComputeContext& ctx, const float* dy, float* dbias, std::size_t outer,
               std::size_t channels, std::size_t inner, bool accumulate) {
  if (ctx.is_cuda())
    return detail::gpu_bias_grad(detail::handles_of(ctx), dy, dbias, outer, channels, inner,
                                 accumulate);
  float* __restrict__ db = dbias;
  if (!accumulate)
    for (std::size_t c = 0; c < channels; ++c) db[c] = 0.0f;
  if (inner == 1) {
    // Row by row: the inner loop runs along contiguous channels and vectorises.
    for (std::size_t o = 0; o < outer; ++o) {
      const float* __restrict__ row = dy + o * channels;
      for (std::size_t c = 0; c < channels; ++c) db[c] += row[c];
    }
    return;
  }
  for (std::size_t c = 0; c < channels; ++c) {
    float sum = 0.0f;
    for (std::size_t o = 0; o < outer; ++o) {
      const float* __restrict__ plane = dy + (o * channels + c) * inner;
      for (std::size_t i = 0; i < inner; ++i) sum += plane[i];
    }
    db[c] = kernels::bias_grad_combine(db[c], sum);
  }
}

}  // namespace ringtrain
