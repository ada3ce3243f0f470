// Host-side launcher for kernels/trial_pattern.cu. Streams travel as void*.
#pragma once

#include <cstddef>
#include <cstdint>

#include "ringtrain/core/dtype.h"

namespace ringtrain::kernels {

// p[i] = trial_pattern_value(i, seed) stored as t (f32, bf16 or f16) for
// i < count, on `stream` (a cudaStream_t).
void fill_trial_pattern_cuda(void* p, DType t, std::size_t count, std::uint32_t seed, void* stream);

}  // namespace ringtrain::kernels
