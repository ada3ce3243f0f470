// A block of channels-last images unfolded (im2col) for a convolution's
// weight gradient as one GEMM (ops/unfolded_gemm_wgrad.h): row t = (n, p, q)
// of the block's outputs holds, at column tap * c + k (tap = r * s_taps +
// s), channel k of the input pixel that tap (r, s) of output (p, q) reads,
// or 0 where that pixel lies in the padding; the row is `ld` values long
// (ld >= r * s * c; the columns past r * s * c are never read). The GPU's
// kernel (kernels/unfolded_taps.cu) and the CPU twin use the same function.
#pragma once

#include <cstddef>

#include "kernels/host_device.cuh"
#include "kernels/shifted_rows.cuh"

namespace ringtrain::kernels {

struct UnfoldedTaps {
  std::size_t images = 0;
  std::size_t h = 0, w = 0, c = 0;  // each input image, channels-last
  std::size_t p = 0, q = 0;         // each output image
  std::size_t r = 0, s = 0;         // the filter's taps
  std::size_t pad_h = 0, pad_w = 0, stride_h = 1, stride_w = 1;
  std::size_t ld = 0;  // values per row
  RT_HD std::size_t rows() const { return images * p * q; }
  RT_HD std::size_t taps() const { return r * s; }
};

// The input pixel (n * h + i) * w + j that tap `tap` of output row t reads,
// or kNoPixel (the padding). by_pq divides by p * q, by_q by q, by_s by s:
// PlainDivide, or FastDivide where the indices fit 32 bits.
template <typename Divide, typename Index>
RT_HD std::size_t unfolded_source(const UnfoldedTaps& g, Index t, Index tap, const Divide& by_pq,
                                  const Divide& by_q, const Divide& by_s) {
  const std::size_t n = by_pq.divide(t);
  const auto at = static_cast<Index>(t - n * g.p * g.q);
  const std::size_t op = by_q.divide(at), oq = at - op * g.q;
  const std::size_t tr = by_s.divide(tap), ts = tap - tr * g.s;
  // Row op * stride + tr of the padded image; below pad_h it is padding.
  const std::size_t i = op * g.stride_h + tr, j = oq * g.stride_w + ts;
  if (i < g.pad_h || j < g.pad_w || i - g.pad_h >= g.h || j - g.pad_w >= g.w) return kNoPixel;
  return (n * g.h + (i - g.pad_h)) * g.w + (j - g.pad_w);
}
RT_HD std::size_t unfolded_source(const UnfoldedTaps& g, std::size_t t, std::size_t tap) {
  return unfolded_source(g, t, tap, PlainDivide{g.p * g.q}, PlainDivide{g.q}, PlainDivide{g.s});
}

}  // namespace ringtrain::kernels
