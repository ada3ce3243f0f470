// Host-side launchers for kernels/grad_clip.cu: clipping by a norm that lives
// in device memory, so the host never reads it. Streams travel as void*.
#pragma once

#include <cstddef>

namespace ringtrain::kernels {

// x *= clip_factor(*sum_squares, max_norm) (grad_clip.cuh), on `stream`.
void clip_by_norm_f32_cuda(float* x, std::size_t n, const double* sum_squares, double max_norm,
                           void* stream);
// *probe = finite_probe(*sum_squares).
void finite_probe_cuda(const double* sum_squares, float* probe, void* stream);

}  // namespace ringtrain::kernels
