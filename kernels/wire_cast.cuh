// Gradients on the wire (--grad-dtype): one element narrowed from the f32
// gradient buffer into the 16-bit wire dtype, scaled on the way (by 1/world
// when the reduction averages: divided before the sum, so a bucket's sum over
// the ranks cannot overflow fp16), and widened back. Shared by
// kernels/wire_cast.cu and the CPU loops in src/sync/gradient_wire.cpp; the
// rounding is kernels/reduce.cuh's (nearest even, as the hardware does).
#pragma once

#include <cstdint>

#include "kernels/host_device.cuh"
#include "kernels/reduce.cuh"

namespace ringtrain::kernels {

RT_HD std::uint16_t narrow_to_wire(float g, float scale, bool bf16) {
  const float x = g * scale;
  return bf16 ? float_to_bf16(x) : float_to_half(x);
}

RT_HD float widen_from_wire(std::uint16_t w, bool bf16) {
  return bf16 ? bf16_to_float(w) : half_to_float(w);
}

}  // namespace ringtrain::kernels
