// Host-side launcher for kernels/adamw.cu: one kernel per update, a no-op
// unless gate->apply; decay_mask: --no-decay (decay_mask.cuh; nullptr: all decay), (nullptr:
// always), whose bias correction counts the applied steps only (nonfinite_guard.cuh). Streams
// travel as void* so that this header needs no CUDA include.
#pragma once

#include <cstddef>

#include "kernels/adamw.cuh"
#include "kernels/nonfinite_guard.cuh"

namespace ringtrain::kernels {

void adamw_f32_cuda(float* params, const float* grads, float* exp_avg, float* exp_avg_sq,
                    std::size_t n, const AdamWCoefficients& coefficients, const float* decay_mask,
                    const NonfiniteGuardState* gate, void* stream);

}  // namespace ringtrain::kernels
