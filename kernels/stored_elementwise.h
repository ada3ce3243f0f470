// Host-side launchers for kernels/stored_elementwise.cu: the elementwise
// passes of layers that keep their activations in the model's storage dtype
// (f32, bf16, f16; ringtrain/model's StoresActivations). Each loads the
// storage type, computes in fp32 with the arithmetic the CPU loops use
// (kernels/activation.cuh, axpy.cuh, scale.cuh) and stores its output's type.
// Pointers are untyped with their DType beside them; streams travel as void*.
#pragma once

#include <cstddef>

#include "ringtrain/core/dtype.h"

namespace ringtrain::kernels {

// y = relu(x); x and y of dtype t.
void relu_forward_stored_cuda(const void* x, void* y, DType t, std::size_t n, void* stream);
// dx = dy where y > 0, else 0; y and dy of dtype t, dx of dx_type (t or f32).
void relu_backward_stored_cuda(const void* y, const void* dy, DType t, void* dx, DType dx_type,
                               std::size_t n, void* stream);
// GPT-2's tanh GELU: y = f(x) of dtype t; dx = f'(x) dy, x and dy of t, dx of
// dx_type.
void gelu_tanh_forward_stored_cuda(const void* x, void* y, DType t, std::size_t n, void* stream);
void gelu_tanh_backward_stored_cuda(const void* x, const void* dy, DType t, void* dx, DType dx_type,
                                    std::size_t n, void* stream);
// y = x0 + a x1, all of dtype t (a residual add as the model stores it).
void sum_two_stored_cuda(const void* x0, const void* x1, float a, void* y, DType t, std::size_t n,
                         void* stream);
// y = a x, x of dtype t, y of y_type (an add's gradient to a scaled input).
void scale_stored_cuda(const void* x, DType t, float a, void* y, DType y_type, std::size_t n,
                       void* stream);

// y (fp32) += x, x of dtype t widened (a 16-bit contribution to an fp32 sum).
void add_widened_cuda(const void* x, DType t, float* y, std::size_t n, void* stream);

// The terms of narrow_sum_cuda, by value in the launch (ops/merge.h's
// kNarrowSumMaxTerms of them at most).
struct NarrowSumTerms {
  static constexpr unsigned kMax = 4;
  const void* term[kMax] = {};
  unsigned count = 0;
};
// y (bf16/f16, y_type) = sum + term[0] + ... + term[count - 1], in that order
// in fp32, each term of dtype t widened, rounded once.
void narrow_sum_cuda(void* y, DType y_type, const float* sum, const NarrowSumTerms& terms, DType t,
                     std::size_t n, void* stream);

// rows blocks of `width` elements: dst[r * dst_pitch + i] = src[r * src_pitch + i],
// converted from src_type to dst_type (a concat's gradient into an fp32 sum).
void convert_blocks_cuda(void* dst, DType dst_type, std::size_t dst_pitch, const void* src,
                         DType src_type, std::size_t src_pitch, std::size_t width, std::size_t rows,
                         void* stream);

}  // namespace ringtrain::kernels
