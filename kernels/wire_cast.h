// Host-side launchers for kernels/wire_cast.cu. Streams travel as void*.
#pragma once

#include <cstddef>
#include <cstdint>

namespace ringtrain::kernels {

// wire[i] = narrow(grads[i] * scale) into bf16 (bf16) or fp16.
void narrow_to_wire_cuda(const float* grads, std::uint16_t* wire, std::size_t n, float scale,
                         bool bf16, void* stream);
// grads[i] = widen(wire[i]).
void widen_from_wire_cuda(const std::uint16_t* wire, float* grads, std::size_t n, bool bf16,
                          void* stream);

}  // namespace ringtrain::kernels
