// Where an element of a [N, C, H*W] activation sits in either layout, and the
// batched transpose that turns one layout into the other. The GPU kernels
// (kernels/layout.cu, the channels-last global average pool) and the CPU path
// use the same index functions.
#pragma once

#include <cstddef>

#include "kernels/host_device.cuh"

namespace ringtrain::kernels {

// Element (n, c, p) of an activation with `channels` channels and `hw` pixels.
RT_HD std::size_t nchw_index(std::size_t n, std::size_t c, std::size_t p, std::size_t channels,
                             std::size_t hw) {
  return (n * channels + c) * hw + p;
}
RT_HD std::size_t nhwc_index(std::size_t n, std::size_t c, std::size_t p, std::size_t channels,
                             std::size_t hw) {
  return (n * hw + p) * channels + c;
}

// The batched transpose [batch, rows, cols] -> [batch, cols, rows]: where
// element (n, i, j) of the input goes. NCHW -> NHWC is rows = C, cols = H*W;
// NHWC -> NCHW is rows = H*W, cols = C; a [K, C, R, S] filter becomes
// [K, R, S, C] with rows = C, cols = R*S.
RT_HD std::size_t transposed_index(std::size_t n, std::size_t i, std::size_t j, std::size_t rows,
                                   std::size_t cols) {
  return (n * cols + j) * rows + i;
}

}  // namespace ringtrain::kernels
