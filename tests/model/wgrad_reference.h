// A convolution's weight gradient in double precision, for the tests of the
// GPU's engines (gpu_cudnn_graph_test) and of the GEMM weight gradients' CPU
// twins (shifted_gemm_wgrad_test, unfolded_gemm_wgrad_test), the bound an
// fp32 accumulation of its exact products keeps to, and the shapes those
// tests build.
#pragma once

#include <cmath>
#include <cstddef>
#include <vector>

#include "ops/cudnn_graph.h"

namespace ringtrain::test {

// A channels-last convolution's shape: n images of c x h x w, k filters of
// r x s, the padding and the stride in each direction; p and q follow.
inline detail::ConvGraphShape nhwc_conv(std::size_t n, std::size_t c, std::size_t h, std::size_t w,
                                        std::size_t k, std::size_t r, std::size_t s,
                                        std::size_t pad_h, std::size_t pad_w, std::size_t stride_h,
                                        std::size_t stride_w, DType dtype = DType::bf16) {
  detail::ConvGraphShape g;
  g.n = n, g.c = c, g.h = h, g.w = w, g.k = k, g.r = r, g.s = s;
  g.pad_h = pad_h, g.pad_w = pad_w;
  g.stride_h = stride_h, g.stride_w = stride_w;
  g.p = (h + 2 * pad_h - r) / stride_h + 1;
  g.q = (w + 2 * pad_w - s) / stride_w + 1;
  g.nhwc = true;
  g.dtype = dtype;
  return g;
}

// Index of element (n, c, h, w) of an [N, C, H, W] tensor in memory.
inline std::size_t index_in(bool nhwc, std::size_t n, std::size_t c, std::size_t h, std::size_t w,
                            std::size_t C, std::size_t H, std::size_t W) {
  return nhwc ? ((n * H + h) * W + w) * C + c : ((n * C + c) * H + h) * W + w;
}

// The weight gradient of shape s from x and dy (in s's memory order) in
// double precision, each element at its place in [K, C, R, S] (kcrs) or
// [K, R, S, C], with sum |x dy| beside it: the accumulation bound's scale.
struct WgradReference {
  std::vector<double> sum, magnitude;
};
inline WgradReference wgrad_reference(const detail::ConvGraphShape& s, const std::vector<float>& x,
                                      const std::vector<float>& dy, bool kcrs) {
  const auto at = [&](auto... i) { return index_in(s.nhwc, i...); };
  WgradReference ref{std::vector<double>(s.k * s.c * s.r * s.s),
                     std::vector<double>(s.k * s.c * s.r * s.s)};
  for (std::size_t k = 0; k < s.k; ++k)
    for (std::size_t c = 0; c < s.c; ++c)
      for (std::size_t r = 0; r < s.r; ++r)
        for (std::size_t t = 0; t < s.s; ++t) {
          double sum = 0, abs_sum = 0;
          for (std::size_t n = 0; n < s.n; ++n)
            for (std::size_t i = 0; i < s.p; ++i)
              for (std::size_t j = 0; j < s.q; ++j) {
                const long h = static_cast<long>(i * s.stride_h + r) - long(s.pad_h);
                const long w = static_cast<long>(j * s.stride_w + t) - long(s.pad_w);
                if (h < 0 || w < 0 || h >= long(s.h) || w >= long(s.w)) continue;
                const double prod =
                    double(x[at(n, c, std::size_t(h), std::size_t(w), s.c, s.h, s.w)]) *
                    double(dy[at(n, k, i, j, s.k, s.p, s.q)]);
                sum += prod;
                abs_sum += std::abs(prod);
              }
          const std::size_t o =
              kcrs ? ((k * s.c + c) * s.r + r) * s.s + t : ((k * s.r + r) * s.s + t) * s.c + c;
          ref.sum[o] = sum;
          ref.magnitude[o] = abs_sum;
        }
  return ref;
}

// How many of got's elements an fp32 accumulation of `terms` exact products
// (in any order and split) cannot reach: |got - sum| > terms 2^-23 sum|x dy|
// plus the sum's own rounding to fp32. NaN counts.
inline std::size_t outside_accumulation_bound(const std::vector<float>& got,
                                              const WgradReference& ref, double terms) {
  std::size_t outside = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double bound = terms * 0x1p-23 * ref.magnitude[i] + 0x1p-24 * std::abs(ref.sum[i]);
    if (!(std::abs(double(got[i]) - ref.sum[i]) <= bound)) ++outside;
  }
  return outside;
}

}  // namespace ringtrain::test
