// Host-side launchers for kernels/sgd.cu: one kernel per update over the whole
// flat buffer. Streams travel as void* so that this header needs no CUDA include.
#pragma once

#include <cstddef>

namespace ringtrain::kernels {

void sgd_plain_f32_cuda(float* params, const float* grads, std::size_t n, float lr,
                        float weight_decay, void* stream);
void sgd_momentum_f32_cuda(float* params, const float* grads, float* momentum_buf, std::size_t n,
                           float lr, float momentum, float weight_decay, bool nesterov,
                           void* stream);

}  // namespace ringtrain::kernels
