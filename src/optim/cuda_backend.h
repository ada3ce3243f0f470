// The optim layer's CUDA side, behind a backend-neutral interface: the CUDA
// build implements it in src/optim/cuda/cuda_backend.cpp, the CPU-only build in
// src/optim/cuda_backend_nocuda.cpp, where every call is a clear Error. So the
// optimizer code dispatches on BufferView::device with no #ifdef.
// Views passed here are f32 on a CUDA device, already checked by the caller.
#pragma once

#include <cstddef>

#include "kernels/adamw.cuh"
#include "ringtrain/core/buffer_view.h"

namespace ringtrain::optim_cuda {

// count zeroed floats on CUDA device `ordinal` (nullptr for count 0).
float* alloc_zeroed_f32(std::size_t count, int ordinal);
void free_f32(float* ptr, int ordinal) noexcept;
// Blocking copies between host memory and a CUDA view (tests, checkpoints).
void copy_to_device(BufferView dst, const float* src);
void copy_to_host(float* dst, BufferView src);

void sgd_step(BufferView params, BufferView grads, float* momentum_buf, float lr, float momentum,
              float weight_decay, bool nesterov);
void adamw_step(BufferView params, BufferView grads, float* exp_avg, float* exp_avg_sq,
                const kernels::AdamWCoefficients& coefficients);
// Sum of squares in double; waits for the result.
double sum_squares(BufferView x);
void scale(BufferView x, float factor);

}  // namespace ringtrain::optim_cuda
