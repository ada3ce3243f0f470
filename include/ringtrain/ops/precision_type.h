// The --precision choice as a type alone, for the headers that carry it
// (the compute context, gemm) without the rounding API of precision.h.
#pragma once

namespace ringtrain {

enum class Precision { fp32 = 0, bf16 = 1, fp16 = 2 };

}  // namespace ringtrain
