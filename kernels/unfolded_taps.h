// Host-side launcher for kernels/unfolded_taps.cu. Streams travel as void*.
#pragma once

#include <cstddef>

#include "kernels/unfolded_taps.cuh"

namespace ringtrain::kernels {

// dst (g.rows() rows of g.ld 16-bit values) = the channels-last images of
// src ([g.images, g.h, g.w, g.c]) unfolded: columns [0, g.taps() * g.c) of
// every row written (padding as 0), the rest untouched, on `stream` (a
// cudaStream_t). dst must not overlap src.
void unfold_taps_cuda(const void* src, void* dst, const UnfoldedTaps& g, void* stream);

}  // namespace ringtrain::kernels
