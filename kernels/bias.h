// Host-side launchers for kernels/bias.cu. Streams travel as void*.
#pragma once

#include <cstddef>

namespace ringtrain::kernels {

// y[o, c, i] += bias[c]
void bias_add_cuda(float* y, const float* bias, std::size_t outer, std::size_t channels,
                   std::size_t inner, void* stream);
// dbias[c] = (accumulate ? dbias[c] : 0) + sum over o, i of dy[o, c, i].
// scratch: device floats for partial sums (scratch_floats of them), used
// when the reduction is split over row slices (kernels/bias.cuh). Bit-for-bit
// repeatable for a given shape.
void bias_grad_cuda(const float* dy, float* dbias, std::size_t outer, std::size_t channels,
                    std::size_t inner, bool accumulate, float* scratch, std::size_t scratch_floats,
                    void* stream);

}  // namespace ringtrain::kernels
