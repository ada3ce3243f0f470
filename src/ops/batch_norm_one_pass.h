// The CPU twin of the GPU's one-pass BatchNorm statistics
// (kernels/batch_norm.cu, batch_norm_welford_cuda): the same partition of
// [n, c, hw] into slices, threads and elements, the same merge order, and the
// same __host__ __device__ functions (kernels/batch_norm_welford.cuh), so it
// gives the GPU's mean and M2 bit for bit. Only tests call it: the CPU's own
// statistics stay two passes in double (src/ops/batch_norm_steps.h).
#pragma once

#include <cstddef>

#include "ringtrain/core/dtype.h"

namespace ringtrain::detail {

// x: n * c * hw values of the storage dtype t (f32, bf16, f16); mean[c],
// m2[c] (sum of squared deviations from mean[c]) and *count = n * hw, as
// kernels::batch_norm_welford_cuda writes them with a scratch of
// scratch_floats floats (the split depends on it: kGpuScratchFloats on a GPU;
// 0 is the one-slice split).
void one_pass_statistics_twin(const void* x, DType t, std::size_t n, std::size_t c, std::size_t hw,
                              std::size_t scratch_floats, float* mean, float* m2, float* count);

}  // namespace ringtrain::detail
