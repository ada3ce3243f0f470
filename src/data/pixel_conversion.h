// Stored uint8 pixels -> normalised float32 (x * scale + offset). This is the
// whole per-sample cost of a --cache read, so it is compiled for several
// instruction sets and picked at load time (a u8 -> f32 widening is 4x the
// vector width with AVX-512 than with the SSE2 baseline).
#pragma once

#include <cstddef>
#include <cstdint>

namespace ringtrain {

void bytes_to_float(const std::uint8_t* src, float* dst, std::size_t n, float scale, float offset);

}  // namespace ringtrain
