// Stored bytes to the model's floats, on either side: the loader threads call
// it on the CPU, and on a GPU rank the loader ships the bytes (a quarter of the
// floats' size across PCIe) and kernels/widen_bytes.cu runs it on the device.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/host_device.cuh"

namespace ringtrain::kernels {

// A stored byte to the model's float: byte * scale + offset per channel, where
// normalize(mean, std) folds into scale = 1 / (255 std), offset = -mean / std.
// The product is rounded before the sum on both sides (the CPU sources that
// call it are compiled without contraction, and the device must not fuse it
// into an FMA either), so a GPU rank sees the floats a CPU rank sees.
RT_HD float normalize_byte(std::uint8_t v, float scale, float offset) {
#if defined(__CUDA_ARCH__)
  return __fadd_rn(__fmul_rn(static_cast<float>(v), scale), offset);
#else
  return static_cast<float>(v) * scale + offset;
#endif
}

// A batch's widening: samples of `channels` planes of `plane` bytes each, one
// (scale, offset) per channel. Images have 1 or 3 channels; data without a
// per-channel normalisation is one channel spanning the whole sample.
inline constexpr int kMaxWidenChannels = 4;
struct ChannelWidening {
  int channels = 1;
  std::size_t plane = 1;  // elements per channel plane
  float scale[kMaxWidenChannels] = {1, 1, 1, 1};
  float offset[kMaxWidenChannels] = {0, 0, 0, 0};
};

// Element i of a batch of such samples.
RT_HD float widen_element(const std::uint8_t* in, std::size_t i, const ChannelWidening& w) {
  const int c = w.channels == 1 ? 0 : static_cast<int>((i / w.plane) % w.channels);
  return normalize_byte(in[i], w.scale[c], w.offset[c]);
}

}  // namespace ringtrain::kernels
