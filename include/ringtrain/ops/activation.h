// Elementwise activations over n contiguous floats on ctx's device.
// The per-element arithmetic is kernels/activation.cuh on both devices.
#pragma once

#include <cstddef>

#include "ringtrain/ops/compute_context.h"

namespace ringtrain {

void relu_forward(const ComputeContext& ctx, const float* x, float* y, std::size_t n);
// dx = dy where y > 0, else 0 (y is relu's output).
void relu_backward(const ComputeContext& ctx, const float* y, const float* dy, float* dx,
                   std::size_t n);
void gelu_forward(const ComputeContext& ctx, const float* x, float* y, std::size_t n);
// dx = dy * gelu'(x) (x is gelu's input).
void gelu_backward(const ComputeContext& ctx, const float* x, const float* dy, float* dx,
                   std::size_t n);

// GELU in GPT-2's tanh form (PyTorch's approximate='tanh').
void gelu_tanh_forward(const ComputeContext& ctx, const float* x, float* y, std::size_t n);
void gelu_tanh_backward(const ComputeContext& ctx, const float* x, const float* dy, float* dx,
                        std::size_t n);

}  // namespace ringtrain
