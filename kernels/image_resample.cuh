// Per-pixel arithmetic of the image path, shared by the CPU loader threads
// (src/data/image_resample.cpp, src/data/image_transform.cpp) and any CUDA
// kernel that resizes or normalises on the device.
//
// The resize is PIL's Image.resize(BILINEAR) (Pillow's Resample.c): a
// separable triangle filter whose support widens with the downscale factor
// (so shrinking averages every input pixel: antialiased), weights normalised
// per output pixel and rounded to 22-bit fixed point, a horizontal pass into
// uint8, then a vertical pass. Using the same weights, rounding and pass order
// makes our bytes PIL's bytes, which torchvision's Resize and RandomResizedCrop
// call on PIL images.
#pragma once

#include <cstdint>

#include "kernels/host_device.cuh"

namespace ringtrain::kernels {

// Pillow: PRECISION_BITS = 32 - 8 - 2.
constexpr int kResamplePrecisionBits = 22;

// The triangle ("bilinear") filter, support 1.
RT_HD double bilinear_filter(double x) {
  if (x < 0.0) x = -x;
  return x < 1.0 ? 1.0 - x : 0.0;
}

// A normalised weight in fixed point, rounded half away from zero.
RT_HD std::int32_t resample_fixed_weight(double w) {
  const double scaled = w * static_cast<double>(1 << kResamplePrecisionBits);
  return static_cast<std::int32_t>(w < 0.0 ? scaled - 0.5 : scaled + 0.5);
}

// The accumulator every output starts from: one half, so that the final shift
// rounds to nearest.
constexpr std::int32_t kResampleHalf = 1 << (kResamplePrecisionBits - 1);

// A weighted sum (started at kResampleHalf) to a byte, clipped to [0, 255].
RT_HD std::uint8_t resample_clip(std::int32_t acc) {
  if (acc <= 0) return 0;
  if (acc >= (255 << kResamplePrecisionBits)) return 255;
  return static_cast<std::uint8_t>(acc >> kResamplePrecisionBits);
}

// One output byte of a pass: `taps` input bytes, `stride` bytes apart, times
// their fixed-point weights, rounded to nearest and clipped to [0, 255].
RT_HD std::uint8_t resample_taps(const std::uint8_t* in, long stride, const std::int32_t* weights,
                                 int taps) {
  std::int32_t acc = kResampleHalf;
  for (int t = 0; t < taps; ++t) acc += static_cast<std::int32_t>(in[t * stride]) * weights[t];
  return resample_clip(acc);
}

// PIL's RGB -> L (ITU-R 601-2 luma) in 16-bit fixed point, as Image.convert("L").
RT_HD std::uint8_t rgb_to_luma(std::uint8_t r, std::uint8_t g, std::uint8_t b) {
  return static_cast<std::uint8_t>((r * 19595u + g * 38470u + b * 7471u + 0x8000u) >> 16);
}

}  // namespace ringtrain::kernels
