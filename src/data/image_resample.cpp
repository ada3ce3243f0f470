// Pillow's two-pass resample (Resample.c, ImagingResampleInner) for the
// bilinear filter: per-axis weights, a horizontal pass over the rows the
// vertical pass needs, then the vertical pass.
#include "data/image_resample.h"

#include <algorithm>
#include <cmath>

#include "kernels/image_resample.cuh"
#include "ringtrain/core/check.h"

namespace ringtrain {
namespace {

// The taps of every output position along one axis: the first input index,
// the tap count and `taps` fixed-point weights (zero-padded) per output.
struct AxisWeights {
  int taps = 0;
  std::vector<int> first, count;
  std::vector<std::int32_t> weights;
};

AxisWeights axis_weights(int in_size, int out_size) {
  AxisWeights a;
  const double scale = static_cast<double>(in_size) / out_size;
  const double filter_scale = std::max(scale, 1.0);
  const double support = 1.0 * filter_scale;  // bilinear support is 1
  a.taps = static_cast<int>(std::ceil(support)) * 2 + 1;
  a.first.resize(out_size);
  a.count.resize(out_size);
  a.weights.assign(static_cast<std::size_t>(out_size) * a.taps, 0);
  std::vector<double> w(a.taps);
  for (int o = 0; o < out_size; ++o) {
    const double center = (o + 0.5) * scale;
    // Truncation toward zero after +0.5, then clamping: Pillow's rounding.
    int lo = static_cast<int>(center - support + 0.5);
    lo = std::max(lo, 0);
    int hi = static_cast<int>(center + support + 0.5);
    hi = std::min(hi, in_size);
    const int n = hi - lo;
    double total = 0.0;
    for (int t = 0; t < n; ++t) {
      w[t] = kernels::bilinear_filter((t + lo - center + 0.5) / filter_scale);
      total += w[t];
    }
    for (int t = 0; t < n; ++t) {
      const double v = total != 0.0 ? w[t] / total : w[t];
      a.weights[static_cast<std::size_t>(o) * a.taps + t] = kernels::resample_fixed_weight(v);
    }
    a.first[o] = lo;
    a.count[o] = n;
  }
  return a;
}

// One row of the horizontal pass; kTaps 0: the tap count from `a`.
template <int kTaps>
void horizontal_row(const std::uint8_t* src, const AxisWeights& a, int c, int out_w,
                    std::uint8_t* dst) {
  const int taps = kTaps ? kTaps : a.taps;
  for (int x = 0; x < out_w; ++x) {
    const std::int32_t* w = a.weights.data() + static_cast<std::size_t>(x) * a.taps;
    const std::uint8_t* p = src + static_cast<std::ptrdiff_t>(a.first[x]) * c;
    for (int k = 0; k < c; ++k) {
      std::int32_t acc = kernels::kResampleHalf;
      for (int t = 0; t < taps; ++t) acc += static_cast<std::int32_t>(p[t * c + k]) * w[t];
      dst[x * c + k] = kernels::resample_clip(acc);
    }
  }
}

}  // namespace

void resize_bilinear_into(const ImageView& in, int out_h, int out_w, std::uint8_t* out,
                          std::vector<std::uint8_t>& scratch) {
  RT_CHECK(in.height > 0 && in.width > 0 && out_h > 0 && out_w > 0,
           "resize: {}x{} to {}x{}: sizes must be positive", in.height, in.width, out_h, out_w);
  const int c = in.channels;
  const std::ptrdiff_t out_stride = static_cast<std::ptrdiff_t>(out_w) * c;
  if (out_h == in.height && out_w == in.width) {  // Pillow copies in this case
    for (int y = 0; y < out_h; ++y) std::copy_n(in.row(y), out_stride, out + y * out_stride);
    return;
  }
  const AxisWeights ay = axis_weights(in.height, out_h);
  // The rows the vertical pass reads, and only those, go through the first pass.
  const int y_first = ay.first[0];
  const int y_last = ay.first[out_h - 1] + ay.count[out_h - 1];
  ImageView mid = in.crop(y_first, 0, y_last - y_first, in.width);
  if (out_w != in.width) {
    const AxisWeights ax = axis_weights(in.width, out_w);
    scratch.resize(static_cast<std::size_t>(mid.height) * out_stride);
    // Each row is copied with `taps` zero pixels after it, so that every
    // output can sum all `taps` (zero-weighted past its count) with a loop
    // length known at compile time: the same sum, several times faster.
    std::vector<std::uint8_t> padded(static_cast<std::size_t>(in.width + ax.taps) * c, 0);
    for (int y = 0; y < mid.height; ++y) {
      std::copy_n(mid.row(y), static_cast<std::size_t>(in.width) * c, padded.data());
      std::uint8_t* dst = scratch.data() + y * out_stride;
      switch (ax.taps) {
        case 3:
          horizontal_row<3>(padded.data(), ax, c, out_w, dst);
          break;
        case 5:
          horizontal_row<5>(padded.data(), ax, c, out_w, dst);
          break;
        case 7:
          horizontal_row<7>(padded.data(), ax, c, out_w, dst);
          break;
        default:
          horizontal_row<0>(padded.data(), ax, c, out_w, dst);
      }
    }
    mid = ImageView{scratch.data(), mid.height, out_w, c, out_stride};
  }
  if (out_h == in.height) {
    for (int y = 0; y < out_h; ++y) std::copy_n(mid.row(y), out_stride, out + y * out_stride);
    return;
  }
  // Row by row, tap by tap over a whole row: the same sums as resample_taps
  // per byte, in an order the compiler vectorises.
  std::vector<std::int32_t> acc(static_cast<std::size_t>(out_stride));
  for (int y = 0; y < out_h; ++y) {
    const std::int32_t* w = ay.weights.data() + static_cast<std::size_t>(y) * ay.taps;
    std::fill(acc.begin(), acc.end(), kernels::kResampleHalf);
    for (int t = 0; t < ay.count[y]; ++t) {
      const std::uint8_t* src = mid.row(ay.first[y] - y_first + t);
      const std::int32_t wt = w[t];
      std::int32_t* a = acc.data();
      for (std::ptrdiff_t i = 0; i < out_stride; ++i)
        a[i] += static_cast<std::int32_t>(src[i]) * wt;
    }
    std::uint8_t* dst = out + y * out_stride;
    for (std::ptrdiff_t i = 0; i < out_stride; ++i) dst[i] = kernels::resample_clip(acc[i]);
  }
}

Image resize_bilinear(const ImageView& in, int out_h, int out_w) {
  Image out(out_h, out_w, in.channels);
  std::vector<std::uint8_t> scratch;
  resize_bilinear_into(in, out_h, out_w, out.pixels.data(), scratch);
  return out;
}

void short_side_size(int h, int w, int short_side, int& out_h, int& out_w) {
  const int s = std::min(h, w), l = std::max(h, w);
  const int new_long = static_cast<int>(static_cast<double>(short_side) * l / s);
  if (h <= w) {
    out_h = short_side;
    out_w = new_long;
  } else {
    out_w = short_side;
    out_h = new_long;
  }
}

int center_offset(int size, int crop) {
  return static_cast<int>(std::nearbyint((size - crop) / 2.0));  // default mode: half to even
}

}  // namespace ringtrain
