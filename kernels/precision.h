// Host-side launcher for kernels/precision.cu. Streams travel as void*.
#pragma once

#include <cstddef>
#include <cstdint>

#include "ringtrain/core/dtype.h"

namespace ringtrain::kernels {

// y[i] = x[i] rounded to the grid of `precision` (kernels/precision.cuh); y may be x.
void round_to_precision_cuda(float* y, const float* x, std::size_t n, DType precision,
                             void* stream);
// y[i] = the bf16/fp16 encoding of x[i] (to_precision_bits), and back.
void to_precision_bits_cuda(std::uint16_t* y, const float* x, std::size_t n, DType precision,
                            void* stream);
void from_precision_bits_cuda(float* y, const std::uint16_t* x, std::size_t n, DType precision,
                              void* stream);

}  // namespace ringtrain::kernels
