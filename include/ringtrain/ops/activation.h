// Elementwise activations over n contiguous floats on ctx's device.
// The per-element arithmetic is kernels/activation.cuh on both devices.
#pragma once

#include <cstddef>

#include "ringtrain/core/buffer_view.h"
#include "ringtrain/ops/compute_context.h"

namespace ringtrain {

void relu_forward(const ComputeContext& ctx, const float* x, float* y, std::size_t n);
// dx = dy where y > 0, else 0 (y is relu's output).
void relu_backward(const ComputeContext& ctx, const float* y, const float* dy, float* dx,
                   std::size_t n);
// The stored forms: x, y and dy in the model's storage dtype (f32, bf16,
// f16), dx in that dtype or f32; computed in fp32, each output rounded once.
void relu_forward(const ComputeContext& ctx, BufferView x, BufferView y);
void relu_backward(const ComputeContext& ctx, BufferView y, BufferView dy, BufferView dx);
void gelu_tanh_forward(const ComputeContext& ctx, BufferView x, BufferView y);
void gelu_tanh_backward(const ComputeContext& ctx, BufferView x, BufferView dy, BufferView dx);
// The CPU twin of cuBLASLt's GELU_AUX_BIAS epilogue's arithmetic (the linear
// + gelu_tanh fusion, ops/linear_gelu.h): from the fp32 pre-activation `pre`
// (aux.count values), aux = pre and y = gelu_tanh(pre), each rounded once
// into its dtype, gelu taken of the unrounded fp32 value. Under fp32 storage
// that is gelu_tanh_forward of the stored pre-activation, bit for bit (the
// same loop). CPU contexts only.
void gelu_tanh_forward_with_aux(const ComputeContext& ctx, const float* pre, BufferView aux,
                                BufferView y);
// The CPU twin of cuBLASLt's DGELU epilogue's arithmetic (the backward of
// that fusion, ops/linear_dgelu.h): from the fp32 gradient of gelu's output
// `d` (d_pre.count values, the next linear's unrounded dx), d = gelu_tanh'(pre)
// · d in fp32, in place, and d_pre = d rounded once into its dtype. The same
// chunks and fp32 loop as gelu_tanh_backward, which reads the gradient
// rounded: under fp32 storage it is that backward, bit for bit. CPU only.
void gelu_tanh_backward_of_sum(const ComputeContext& ctx, BufferView pre, float* d,
                               BufferView d_pre);
void gelu_forward(const ComputeContext& ctx, const float* x, float* y, std::size_t n);
// dx = dy * gelu'(x) (x is gelu's input).
void gelu_backward(const ComputeContext& ctx, const float* x, const float* dy, float* dx,
                   std::size_t n);

// GELU in GPT-2's tanh form (PyTorch's approximate='tanh').
void gelu_tanh_forward(const ComputeContext& ctx, const float* x, float* y, std::size_t n);
void gelu_tanh_backward(const ComputeContext& ctx, const float* x, const float* dy, float* dx,
                        std::size_t n);

}  // namespace ringtrain
