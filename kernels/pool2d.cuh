// The arithmetic of 2-D max and average pooling, one output or one input
// gradient element at a time, shared by the CPU loops (src/ops/pool2d.cpp) and
// the GPU kernels (kernels/pool2d.cu), so both sides compute the same bits.
//
// A plane is one channel of one sample; its pixel i sits at plane[i * pixel]
// (pixel is 1 in NCHW, C in NHWC). Windows are clipped to the input (padded
// positions never win a max and count as zeros in an average's divisor, as
// PyTorch's count_include_pad=True). Max records the window's argmax (the
// first maximum in row-major order, as an index within the input plane), and
// backward gathers: each input element sums the gradients of the windows that
// chose it, in output order, which is the order the scatter x -> y would add
// them in, so the gather gives the scatter's bits with one write per element
// and no atomics.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/host_device.cuh"
#include "kernels/rounded_arithmetic.cuh"
#include "kernels/storage.cuh"

namespace ringtrain::kernels {

struct PoolShape {
  std::uint32_t height, width;          // input plane
  std::uint32_t out_height, out_width;  // output plane
  std::uint32_t kernel, stride, padding;
};

// The input rows [begin, end) that output row o's window covers (also columns).
struct PoolSpan {
  std::uint32_t begin, end;
};

RT_HD PoolSpan pool_window_span(std::uint32_t o, std::uint32_t in, PoolShape s) {
  const std::int64_t first = std::int64_t{o} * s.stride - s.padding;
  const std::int64_t last = first + s.kernel;
  return {static_cast<std::uint32_t>(first < 0 ? 0 : first),
          static_cast<std::uint32_t>(last > in ? in : last)};
}

// The outputs [begin, end) whose windows cover input row i (also columns):
// o s - p <= i < o s - p + k.
RT_HD PoolSpan pool_covering_span(std::uint32_t i, std::uint32_t out, PoolShape s) {
  const std::uint32_t top = i + s.padding;
  const std::uint32_t begin = top >= s.kernel ? (top - s.kernel) / s.stride + 1 : 0;
  const std::uint32_t end = top / s.stride + 1;
  return {begin, end < out ? end : out};
}

// The output at the window rows x cols of a max pool over plane (the spans of
// pool_window_span); *argmax receives the winner's index.
template <typename Plane>
RT_HD float max_pool_output(const Plane& x, PoolShape s, PoolSpan rows, PoolSpan cols,
                            std::int32_t* argmax) {
  std::uint32_t best_at = rows.begin * s.width + cols.begin;
  float best = x[best_at];
  for (std::uint32_t r = rows.begin; r < rows.end; ++r)
    for (std::uint32_t c = cols.begin; c < cols.end; ++c) {
      const float v = x[r * s.width + c];
      if (v > best) {  // NaN never wins unless it comes first, as the comparison says
        best = v;
        best_at = r * s.width + c;
      }
    }
  *argmax = static_cast<std::int32_t>(best_at);
  return best;
}

// The output at the window rows x cols of an average pool: the window's sum
// over the kernel's area.
template <typename Plane>
RT_HD float avg_pool_output(const Plane& x, PoolShape s, PoolSpan rows, PoolSpan cols) {
  float sum = 0.0f;
  for (std::uint32_t r = rows.begin; r < rows.end; ++r)
    for (std::uint32_t c = cols.begin; c < cols.end; ++c) sum += x[r * s.width + c];
  return sum * (1.0f / static_cast<float>(s.kernel * s.kernel));
}

// dx at input (h, w) of a max pool, whose covering outputs are rows x cols
// (pool_covering_span): the dy of every window whose argmax it is.
template <typename Plane, typename IndexPlane>
RT_HD float max_pool_input_grad(const Plane& dy, const IndexPlane& argmax, PoolShape s,
                                std::uint32_t h, std::uint32_t w, PoolSpan rows, PoolSpan cols) {
  const auto self = static_cast<std::int32_t>(h * s.width + w);
  float acc = 0.0f;
  for (std::uint32_t oh = rows.begin; oh < rows.end; ++oh)
    for (std::uint32_t ow = cols.begin; ow < cols.end; ++ow)
      if (argmax[oh * s.out_width + ow] == self) acc += dy[oh * s.out_width + ow];
  return acc;
}

// dx of an average pool at an input whose covering outputs are rows x cols:
// each covering window's dy / k^2.
template <typename Plane>
RT_HD float avg_pool_input_grad(const Plane& dy, PoolShape s, PoolSpan rows, PoolSpan cols) {
  const float inv_area = 1.0f / static_cast<float>(s.kernel * s.kernel);
  float acc = 0.0f;
  for (std::uint32_t oh = rows.begin; oh < rows.end; ++oh)
    for (std::uint32_t ow = cols.begin; ow < cols.end; ++ow)
      // Rounded before the sum: the device must not fuse it into an FMA, or
      // an average's gradient would differ from the CPU's in the last bit.
      acc += mul_rn(dy[oh * s.out_width + ow], inv_area);
  return acc;
}

// One channel of one sample seen through its layout's pixel stride.
template <typename T>
struct StridedPlane {
  T* p;
  std::uint32_t pixel;
  RT_HD T& operator[](std::uint32_t i) const { return p[static_cast<std::size_t>(i) * pixel]; }
};

// The same, read from a storage type (kernels/storage.cuh) widened to fp32.
template <typename T>
struct StoredPlane {
  const T* p;
  std::uint32_t pixel;
  RT_HD float operator[](std::uint32_t i) const {
    return load(p, static_cast<std::size_t>(i) * pixel);
  }
};

}  // namespace ringtrain::kernels
