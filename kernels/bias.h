// Host-side launchers for kernels/bias.cu. Streams travel as void*.
#pragma once

#include <cstddef>

#include "ringtrain/core/dtype.h"

namespace ringtrain::kernels {

// y[o, c, i] = x[o, c, i] + bias[c] (x may be y); x of x_type and y (and dy
// below) of the storage dtype t (f32, bf16, f16), the sum in fp32.
void bias_add_cuda(const void* x, DType x_type, void* y, DType t, const float* bias,
                   std::size_t outer, std::size_t channels, std::size_t inner, void* stream);
// dbias[c] = (accumulate ? dbias[c] : 0) + sum over o, i of dy[o, c, i].
// scratch: device floats for partial sums (scratch_floats of them), used
// when the reduction is split over row slices (kernels/bias.cuh). Bit-for-bit
// repeatable for a given shape.
void bias_grad_cuda(const void* dy, DType t, float* dbias, std::size_t outer, std::size_t channels,
                    std::size_t inner, bool accumulate, float* scratch, std::size_t scratch_floats,
                    void* stream);

}  // namespace ringtrain::kernels
