// Host-side launcher for kernels/precision.cu. Streams travel as void*.
#pragma once

#include <cstddef>

namespace ringtrain::kernels {

// y[i] = x[i] rounded to the grid of `precision` (kernels/precision.cuh); y may be x.
void round_to_precision_cuda(float* y, const float* x, std::size_t n, int precision, void* stream);

}  // namespace ringtrain::kernels
