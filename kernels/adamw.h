// Host-side launcher for kernels/adamw.cu: one kernel per update. Streams travel
// as void* so that this header needs no CUDA include.
#pragma once

#include <cstddef>

#include "kernels/adamw.cuh"

namespace ringtrain::kernels {

void adamw_f32_cuda(float* params, const float* grads, float* exp_avg, float* exp_avg_sq,
                    std::size_t n, const AdamWCoefficients& coefficients, void* stream);

}  // namespace ringtrain::kernels
