#include "ringtrain/ops/precision.h"

#include "kernels/precision.cuh"
#include "ops/gpu_ops.h"
#include "ringtrain/core/check.h"

namespace ringtrain {

static_assert(static_cast<int>(Precision::bf16) == kernels::kPrecisionBf16 &&
              static_cast<int>(Precision::fp16) == kernels::kPrecisionFp16);

Precision parse_precision(std::string_view text) {
  if (text == "fp32") return Precision::fp32;
  if (text == "bf16") return Precision::bf16;
  if (text == "fp16") return Precision::fp16;
  RT_CHECK(false, "--precision: unknown value '{}' (expected fp32, bf16 or fp16)", text);
  __builtin_unreachable();
}

const char* precision_name(Precision p) {
  switch (p) {
    case Precision::bf16:
      return "bf16";
    case Precision::fp16:
      return "fp16";
    case Precision::fp32:
      break;
  }
  return "fp32";
}

void round_to_precision(const ComputeContext& ctx, float* y, const float* x, std::size_t n,
                        Precision p) {
  if (n == 0) return;
  if (ctx.is_cuda())
    return detail::gpu_round_to_precision(ctx.stream(), y, x, n, static_cast<int>(p));
  const int kind = static_cast<int>(p);
  for (std::size_t i = 0; i < n; ++i) y[i] = kernels::round_to_precision_grid(x[i], kind);
}

}  // namespace ringtrain
