// Host-side launcher for kernels/shifted_rows.cu. Streams travel as void*.
#pragma once

#include <cstddef>

#include "kernels/shifted_rows.cuh"

namespace ringtrain::kernels {

// dst (g.rows() rows of `channels` 16-bit values) = the channels-last images
// of src ([g.images, g.h, g.w, channels]) placed in their grids, every other
// row zero, on `stream` (a cudaStream_t). dst must not overlap src.
void pad_rows_cuda(const void* src, void* dst, const PaddedRows& g, std::size_t channels,
                   void* stream);

}  // namespace ringtrain::kernels
