// Host-side launcher for kernels/scale.cu. Streams travel as void*.
#pragma once

#include <cstddef>

namespace ringtrain::kernels {

void scale_f32_cuda(float* x, std::size_t n, float factor, void* stream);

}  // namespace ringtrain::kernels
