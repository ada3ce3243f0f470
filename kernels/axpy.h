// Host-side launchers for kernels/axpy.cu. Streams travel as void* so that this
// header needs no CUDA include.
#pragma once

#include <cstddef>

namespace ringtrain::kernels {

void axpy_f32_cuda(float a, const float* x, float* y, std::size_t n, void* stream);

}  // namespace ringtrain::kernels
