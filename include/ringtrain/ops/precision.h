// --precision: the numbers a model computes with. fp32 everywhere, or bf16 /
// fp16 storage of the weights the matrix products read, of every activation
// and of every activation gradient, with fp32 accumulation inside each op;
// master weights, weight gradients, BatchNorm statistics, the loss and the
// optimizer stay fp32 (the per-op policy is in docs/precision.md).
//
// Low precision is rounding to the low-precision grid (round to nearest even)
// at the points where a mixed-precision run stores a low-precision tensor, on
// the CPU and (as of now) on the GPU alike, so both compute the same numbers.
#pragma once

#include <cstddef>
#include <string_view>

#include "ringtrain/ops/compute_context.h"

namespace ringtrain {

enum class Precision { fp32 = 0, bf16 = 1, fp16 = 2 };

// "fp32", "bf16", "fp16" (the --precision flag); an Error naming the flag otherwise.
Precision parse_precision(std::string_view text);
const char* precision_name(Precision p);

// y[i] = x[i] rounded to the grid of `p` (a copy for fp32); y may be x.
void round_to_precision(const ComputeContext& ctx, float* y, const float* x, std::size_t n,
                        Precision p);

}  // namespace ringtrain
