#include "ringtrain/ops/precision.h"

#include "kernels/precision.cuh"
#include "ops/gpu_ops.h"
#include "ringtrain/core/check.h"

namespace ringtrain {

DType parse_precision(std::string_view text) {
  if (text == "fp32") return DType::f32;
  if (text == "bf16") return DType::bf16;
  if (text == "fp16") return DType::f16;
  RT_CHECK(false, "--precision: unknown value '{}' (expected fp32, bf16 or fp16)", text);
  __builtin_unreachable();
}

const char* precision_name(DType p) {
  RT_CHECK(is_compute_precision(p), "{} is not a --precision (fp32, bf16 or fp16)", dtype_name(p));
  return p == DType::bf16 ? "bf16" : p == DType::f16 ? "fp16" : "fp32";
}

void round_to_precision(const ComputeContext& ctx, float* y, const float* x, std::size_t n,
                        DType p) {
  if (n == 0) return;
  if (ctx.is_cuda()) return detail::gpu_round_to_precision(ctx.stream(), y, x, n, p);
  for (std::size_t i = 0; i < n; ++i) y[i] = kernels::round_to_precision_grid(x[i], p);
}

}  // namespace ringtrain
