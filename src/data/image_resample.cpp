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
    for (int y = 0; y < mid.height; ++y) {
      const std::uint8_t* src = mid.row(y);
      std::uint8_t* dst = scratch.data() + y * out_stride;
      for (int x = 0; x < out_w; ++x) {
        const std::int32_t* w = ax.weights.data() + static_cast<std::size_t>(x) * ax.taps;
        const std::uint8_t* p = src + static_cast<std::ptrdiff_t>(ax.first[x]) * c;
        for (int k = 0; k < c; ++k)
          dst[x * c + k] = kernels::resample_taps(p + k, c, w, ax.count[x]);
      }
    }
    mid = ImageView{scratch.data(), mid.height, out_w, c, out_stride};
  }
  if (out_h == in.height) {
    for (int y = 0; y < out_h; ++y) std::copy_n(mid.row(y), out_stride, out + y * out_stride);
    return;
  }
  for (int y = 0; y < out_h; ++y) {
    const std::int32_t* w = ay.weights.data() + static_cast<std::size_t>(y) * ay.taps;
    const std::uint8_t* src = mid.row(ay.first[y] - y_first);
    std::uint8_t* dst = out + y * out_stride;
    for (std::ptrdiff_t i = 0; i < out_stride; ++i)
      dst[i] = kernels::resample_taps(src + i, mid.row_stride, w, ay.count[y]);
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
