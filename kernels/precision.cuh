// Rounding an fp32 value to the bf16 or fp16 grid (round to nearest even, as
// the hardware converts; fp16 overflows to Inf at 65520). Low-precision
// storage of weights, activations and activation gradients is this rounding:
// the GPU kernel (kernels/precision.cu) and the CPU path call the same
// function, so the CPU tests cover the numbers a low-precision run sees.
#pragma once

#include "kernels/host_device.cuh"
#include "kernels/reduce.cuh"
#include "ringtrain/core/dtype.h"

namespace ringtrain::kernels {

RT_HD float round_to_bf16_grid(float x) {
  return bf16_to_float(float_to_bf16(x));
}
RT_HD float round_to_fp16_grid(float x) {
  return half_to_float(float_to_half(x));
}
// The grid of `precision` (bf16 or f16); any other dtype leaves x as it is.
RT_HD float round_to_precision_grid(float x, DType precision) {
  return precision == DType::bf16  ? round_to_bf16_grid(x)
         : precision == DType::f16 ? round_to_fp16_grid(x)
                                   : x;
}

// The 16-bit encoding of x in `precision` (bf16 or fp16 bits), rounded as
// round_to_precision_grid rounds: a value already on that grid converts
// exactly, so the GPU's tensor-core products can read 16-bit copies of the
// fp32 buffers that hold on-grid values, and give the rounding path's numbers.
RT_HD std::uint16_t to_precision_bits(float x, DType precision) {
  return precision == DType::f16 ? float_to_half(x) : float_to_bf16(x);
}
RT_HD float from_precision_bits(std::uint16_t bits, DType precision) {
  return precision == DType::f16 ? half_to_float(bits) : bf16_to_float(bits);
}

}  // namespace ringtrain::kernels
