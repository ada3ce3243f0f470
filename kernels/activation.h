// Host-side launchers for kernels/activation.cu. Streams travel as void*.
#pragma once

#include <cstddef>

namespace ringtrain::kernels {

void relu_forward_cuda(const float* x, float* y, std::size_t n, void* stream);
void relu_backward_cuda(const float* y, const float* dy, float* dx, std::size_t n, void* stream);
void gelu_forward_cuda(const float* x, float* y, std::size_t n, void* stream);
void gelu_backward_cuda(const float* x, const float* dy, float* dx, std::size_t n, void* stream);
// GPT-2's tanh form (kernels/activation.cuh).
void gelu_tanh_forward_cuda(const float* x, float* y, std::size_t n, void* stream);
void gelu_tanh_backward_cuda(const float* x, const float* dy, float* dx, std::size_t n,
                             void* stream);

}  // namespace ringtrain::kernels
