// Stored uint8 pixels -> normalised float32 (x * scale + offset). This is the
// whole per-sample cost of a --cache read, so it is compiled for several
// instruction sets and picked at load time (a u8 -> f32 widening is 4x the
// vector width with AVX-512 than with the SSE2 baseline). The arithmetic is
// kernels::normalize_byte, the function the GPU's widening kernel runs.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/widen_bytes.cuh"

namespace ringtrain {

void bytes_to_float(const std::uint8_t* src, float* dst, std::size_t n, float scale, float offset);

// A batch of bytes widened per channel on the CPU: what the GPU's
// kernels::widen_bytes_cuda computes, element for element.
void widen_bytes(const std::uint8_t* src, float* dst, std::size_t n,
                 const kernels::ChannelWidening& w);

}  // namespace ringtrain
