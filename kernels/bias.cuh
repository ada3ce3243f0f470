// Per-channel bias of a [outer, channels, inner] activation (Linear: inner = 1;
// Conv2d: inner = H*W). Shared by kernels/bias.cu and src/ops/bias.cpp.
#pragma once

#include <cstddef>

#include "kernels/host_device.cuh"

namespace ringtrain::kernels {

RT_HD float bias_add_element(float y, float bias) {
  return y + bias;
}

// The gradient of one bias entry accumulated onto `previous` (0 to overwrite).
RT_HD float bias_grad_combine(float previous, float sum) {
  return previous + sum;
}

// ---- how the GPU splits the bias-gradient reduction --------------------------
// Rows (the `outer` index) are cut into `slices` contiguous slices; every
// (channel group, slice) pair is one thread block, which sums its part in a
// fixed order. With one slice the blocks write dbias directly; otherwise they
// write partial sums to a [slices, channels] scratch and a second kernel adds
// each channel's partials in slice order. No float atomics: the result is a
// function of the shape alone, bit for bit, on any GPU (the split does not
// depend on the device's multiprocessor count).
constexpr std::size_t kBiasTileChannels = 32;           // inner == 1: a warp spans 32 channels
constexpr std::size_t kBiasTileRows = 8;                // ... and 8 warps share the rows
constexpr std::size_t kBiasPlaneThreads = 256;          // inner > 1: threads of one block
constexpr std::size_t kBiasTargetBlocks = 2048;         // a few waves on any current GPU
constexpr std::size_t kBiasMinRowsPerBlock = 64;        // inner == 1
constexpr std::size_t kBiasMinElementsPerBlock = 4096;  // inner > 1

struct BiasGradSplit {
  std::size_t slices = 1;
  std::size_t rows_per_slice = 0;  // the last slice may have fewer
  // Thread blocks across the channels: channel tiles (inner == 1) or channels.
  std::size_t channel_blocks = 0;
};

// scratch_floats: capacity of the partial-sum scratch (slices * channels must
// fit, or a single slice is used).
inline BiasGradSplit bias_grad_split(std::size_t outer, std::size_t channels, std::size_t inner,
                                     std::size_t scratch_floats) {
  BiasGradSplit s;
  s.channel_blocks = inner == 1 ? (channels + kBiasTileChannels - 1) / kBiasTileChannels : channels;
  s.rows_per_slice = outer;
  if (outer == 0 || channels == 0 || inner == 0) return s;
  const std::size_t min_rows =
      inner == 1 ? kBiasMinRowsPerBlock : (kBiasMinElementsPerBlock + inner - 1) / inner;
  std::size_t slices = (kBiasTargetBlocks + s.channel_blocks - 1) / s.channel_blocks;
  const std::size_t by_work = outer / min_rows;  // each slice gets at least min_rows rows
  const std::size_t by_scratch = scratch_floats / channels;
  if (slices > by_work) slices = by_work;
  if (slices > by_scratch) slices = by_scratch;
  if (slices < 2) return s;
  s.rows_per_slice = (outer + slices - 1) / slices;
  s.slices = (outer + s.rows_per_slice - 1) / s.rows_per_slice;  // no empty slice
  return s;
}

// Rows [begin, end) of slice `slice`.
RT_HD std::size_t bias_slice_begin(std::size_t slice, std::size_t rows_per_slice) {
  return slice * rows_per_slice;
}
RT_HD std::size_t bias_slice_end(std::size_t slice, std::size_t rows_per_slice, std::size_t outer) {
  const std::size_t end = (slice + 1) * rows_per_slice;
  return end < outer ? end : outer;
}

}  // namespace ringtrain::kernels
