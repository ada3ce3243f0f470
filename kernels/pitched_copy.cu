// Pitched rows copied by aligned units on the GPU: kernels/pitched_copy.cuh.
#include <cstdint>

#include "core/cuda/check_cuda.h"
#include "kernels/launch_shape.cuh"
#include "kernels/pitched_copy.cuh"
#include "kernels/pitched_copy.h"

namespace ringtrain::kernels {

namespace {

template <unsigned Bytes>
struct UnitOf;
template <>
struct UnitOf<16> {
  using type = uint4;
};
template <>
struct UnitOf<8> {
  using type = uint2;
};
template <>
struct UnitOf<4> {
  using type = std::uint32_t;
};
template <>
struct UnitOf<2> {
  using type = std::uint16_t;
};
template <>
struct UnitOf<1> {
  using type = std::uint8_t;
};

template <unsigned Bytes>
__global__ void copy_pitched_kernel(char* __restrict__ dst, const char* __restrict__ src,
                                    PitchedUnits units, std::uint32_t total) {
  using U = typename UnitOf<Bytes>::type;
  const std::uint32_t stride = gridDim.x * blockDim.x;
  for (std::uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < total; i += stride)
    *reinterpret_cast<U*>(dst + units.dst_offset(i)) =
        *reinterpret_cast<const U*>(src + units.src_offset(i));
}

template <unsigned Bytes>
void launch(void* dst, const void* src, const PitchedUnits& units, std::uint32_t total,
            void* stream) {
  copy_pitched_kernel<Bytes>
      <<<elementwise_blocks(total), kElementwiseThreads, 0, static_cast<cudaStream_t>(stream)>>>(
          static_cast<char*>(dst), static_cast<const char*>(src), units, total);
}

}  // namespace

bool copy_pitched_cuda(void* dst, std::size_t dst_pitch, const void* src, std::size_t src_pitch,
                       std::size_t width, std::size_t rows, void* stream) {
  if (rows == 0 || width == 0) return true;
  const unsigned unit =
      pitched_copy_unit(reinterpret_cast<std::uintptr_t>(dst),
                        reinterpret_cast<std::uintptr_t>(src), dst_pitch, src_pitch, width);
  const std::size_t per_row = width / unit, total = per_row * rows;
  // The grid-stride index passes total by up to the grid's size: it must
  // not wrap in 32 bits.
  if (total + std::size_t{elementwise_blocks(total)} * kElementwiseThreads > UINT32_MAX)
    return false;
  const PitchedUnits units{FastDivide(static_cast<std::uint32_t>(per_row)), dst_pitch, src_pitch,
                           unit};
  const auto n = static_cast<std::uint32_t>(total);
  switch (unit) {
    case 16:
      launch<16>(dst, src, units, n, stream);
      break;
    case 8:
      launch<8>(dst, src, units, n, stream);
      break;
    case 4:
      launch<4>(dst, src, units, n, stream);
      break;
    case 2:
      launch<2>(dst, src, units, n, stream);
      break;
    default:
      launch<1>(dst, src, units, n, stream);
      break;
  }
  RT_CUDA_CHECK_LAUNCH();
  return true;
}

}  // namespace ringtrain::kernels
