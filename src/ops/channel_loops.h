// The CPU loops over an [outer, channels, inner] buffer that the per-channel
// ops share (bias add, bias + ReLU, their gradients): NCHW is inner = H·W,
// NHWC and a linear layer's rows inner = 1. The reduction's order is part of
// the bits, and the fused forms must keep the unfused ones', so it lives here
// once.
#pragma once

#include <cstddef>

#include "kernels/bias.cuh"

namespace ringtrain::detail {

// f(i, c) for every element i and its channel c, in memory order (inner = 1
// without an inner loop, so the channel loop vectorises).
template <typename F>
void for_each_channel_element(std::size_t outer, std::size_t channels, std::size_t inner, F&& f) {
  if (inner == 1) {
    for (std::size_t o = 0; o < outer; ++o)
      for (std::size_t c = 0; c < channels; ++c) f(o * channels + c, c);
    return;
  }
  for (std::size_t o = 0; o < outer; ++o)
    for (std::size_t c = 0; c < channels; ++c) {
      const std::size_t plane = (o * channels + c) * inner;
      for (std::size_t i = 0; i < inner; ++i) f(plane + i, c);
    }
}

// db[c] += the sum over channel c's elements of g(i) (g may also write
// element i). With inner = 1, row by row onto db: the inner loop runs along
// contiguous channels and vectorises. Otherwise each channel's planes are
// summed apart, then combined with db[c].
template <typename G>
void accumulate_channel_sums(float* __restrict__ db, std::size_t outer, std::size_t channels,
                             std::size_t inner, G&& g) {
  if (inner == 1) {
    for (std::size_t o = 0; o < outer; ++o)
      for (std::size_t c = 0; c < channels; ++c) db[c] += g(o * channels + c);
    return;
  }
  for (std::size_t c = 0; c < channels; ++c) {
    float sum = 0.0f;
    for (std::size_t o = 0; o < outer; ++o) {
      const std::size_t plane = (o * channels + c) * inner;
      for (std::size_t i = 0; i < inner; ++i) sum += g(plane + i);
    }
    db[c] = kernels::bias_grad_combine(db[c], sum);
  }
}

}  // namespace ringtrain::detail
