// Host-side launchers for kernels/sgd.cu: one kernel per update over the whole
// flat buffer (decay_mask: --no-decay, decay_mask.cuh; nullptr: all decay), a no-op unless
// gate->apply (gate: the --nonfinite decision taken on the device, nonfinite_guard.cuh; nullptr:
// always). Streams travel as void* so that this header needs no CUDA include.
#pragma once

#include <cstddef>

#include "kernels/nonfinite_guard.cuh"

namespace ringtrain::kernels {

void sgd_plain_f32_cuda(float* params, const float* grads, std::size_t n, float lr,
                        float weight_decay, const float* decay_mask,
                        const NonfiniteGuardState* gate, void* stream);
void sgd_momentum_f32_cuda(float* params, const float* grads, float* momentum_buf, std::size_t n,
                           float lr, float momentum, float weight_decay, bool nesterov,
                           const float* decay_mask, const NonfiniteGuardState* gate, void* stream);

}  // namespace ringtrain::kernels
