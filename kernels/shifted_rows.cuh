// Images laid out so that a stride-1 convolution's weight gradient is R*S
// plain GEMMs (ops/shifted_gemm_wgrad.h): a block of channels-last images
// copied into a larger zero grid, each image at (top, left) of its own
// hp x wp grid, followed by `tail` zero rows. Row t of the grid is a pixel of
// one image or a zero; the GPU's copy kernel (kernels/shifted_rows.cu) and
// the CPU twin use the same function.
#pragma once

#include <cstddef>

#include "kernels/fast_divide.cuh"
#include "kernels/host_device.cuh"

namespace ringtrain::kernels {

struct PaddedRows {
  std::size_t images = 0;         // images in the block
  std::size_t h = 0, w = 0;       // each image's extent
  std::size_t hp = 0, wp = 0;     // each image's grid (hp >= top + h, wp >= left + w)
  std::size_t top = 0, left = 0;  // where the image sits in its grid
  std::size_t tail = 0;           // zero rows after the last grid
  RT_HD std::size_t rows() const { return images * hp * wp + tail; }
};

// A grid row that holds no pixel.
constexpr std::size_t kNoPixel = ~std::size_t{0};

// Division by a size_t divisor, as FastDivide divides 32-bit indices.
struct PlainDivide {
  std::size_t divisor = 1;
  RT_HD std::size_t divide(std::size_t n) const { return n / divisor; }
};

// The pixel (n * h + i) * w + j that grid row t holds, or kNoPixel;
// by_grid divides by hp * wp, by_wp by wp (PlainDivide, or FastDivide where
// the rows fit 32 bits: the GPU has no integer divider).
template <typename Divide, typename Index>
RT_HD std::size_t padded_row_source(const PaddedRows& g, Index t, const Divide& by_grid,
                                    const Divide& by_wp) {
  const std::size_t n = by_grid.divide(t);
  if (n >= g.images) return kNoPixel;
  const auto at = static_cast<Index>(t - n * g.hp * g.wp);
  const std::size_t i = by_wp.divide(at), j = at - i * g.wp;
  if (i < g.top || j < g.left || i - g.top >= g.h || j - g.left >= g.w) return kNoPixel;
  return (n * g.h + (i - g.top)) * g.w + (j - g.left);
}
RT_HD std::size_t padded_row_source(const PaddedRows& g, std::size_t t) {
  return padded_row_source(g, t, PlainDivide{g.hp * g.wp}, PlainDivide{g.wp});
}

}  // namespace ringtrain::kernels
