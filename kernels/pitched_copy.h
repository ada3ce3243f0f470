// Host-side launcher for kernels/pitched_copy.cu. Streams travel as void*.
#pragma once

#include <cstddef>

namespace ringtrain::kernels {

// Rows of `width` bytes from src (rows `src_pitch` bytes apart) to dst (rows
// `dst_pitch` apart), both in device memory, on `stream`: one thread per
// aligned unit (kernels/pitched_copy.cuh). False, launching nothing, where
// its units (plus a grid) do not count in 32 bits: the caller copies it
// otherwise.
bool copy_pitched_cuda(void* dst, std::size_t dst_pitch, const void* src, std::size_t src_pitch,
                       std::size_t width, std::size_t rows, void* stream);

}  // namespace ringtrain::kernels
