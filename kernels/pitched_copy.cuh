// A copy of `rows` rows of `width` bytes between two pitched buffers, as
// fixed-size units (16 bytes where every address, pitch and the width
// allow): what kernels/pitched_copy.cu's threads each move, with the unit's
// source and destination from its flat index. A concat's slices in
// channels-last are such rows (64 bf16 channels: 128 bytes, pitch the
// concat's width), which cudaMemcpy2D moved at 0.4 to 0.6 TB/s on an H200
// (inception3's concats, round 7: 3.3 ms of a step). tests/model/pitched_copy_test.cpp runs the
// same index mapping on the CPU against row-by-row memcpy.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/fast_divide.cuh"
#include "kernels/host_device.cuh"

namespace ringtrain::kernels {

// The largest unit of 16, 8, 4, 2 or 1 bytes that divides both addresses,
// both pitches and the width: every unit then stays aligned.
inline unsigned pitched_copy_unit(std::uintptr_t dst, std::uintptr_t src, std::size_t dst_pitch,
                                  std::size_t src_pitch, std::size_t width) {
  const std::uintptr_t all = dst | src | dst_pitch | src_pitch | width;
  unsigned unit = 16;
  while (unit > 1 && (all % unit) != 0) unit /= 2;
  return unit;
}

// Unit i's byte offsets: row i / units_per_row, the unit's place in it.
struct PitchedUnits {
  FastDivide units_per_row;  // width / unit
  std::size_t dst_pitch = 0, src_pitch = 0;
  unsigned unit = 1;
  RT_HD std::size_t dst_offset(std::uint32_t i) const {
    const std::uint32_t row = units_per_row.divide(i);
    return std::size_t{row} * dst_pitch + std::size_t{i - row * units_per_row.divisor} * unit;
  }
  RT_HD std::size_t src_offset(std::uint32_t i) const {
    const std::uint32_t row = units_per_row.divide(i);
    return std::size_t{row} * src_pitch + std::size_t{i - row * units_per_row.divisor} * unit;
  }
};

}  // namespace ringtrain::kernels
