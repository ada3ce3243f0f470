// Host-side launchers for kernels/axpy.cu. Streams travel as void* so that this
// header needs no CUDA include.
#pragma once

#include <cstddef>

#include "ringtrain/core/dtype.h"

namespace ringtrain::kernels {

void axpy_f32_cuda(float a, const float* x, float* y, std::size_t n, void* stream);
// out = a*x + y rounded to `precision`'s grid (kernels/precision.cuh codes), in
// one pass: a residual sum as the model stores it.
void axpy_rounded_f32_cuda(float a, const float* x, const float* y, float* out, std::size_t n,
                           DType precision, void* stream);

}  // namespace ringtrain::kernels
