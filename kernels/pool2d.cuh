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

// At most how many outputs a side cover one input (the rows of
// pool_covering_span): ceil(kernel / stride). The unrolled kernels size their
// loads by it.
RT_HD constexpr std::uint32_t pool_max_cover(std::uint32_t kernel, std::uint32_t stride) {
  return (kernel + stride - 1) / stride;
}

// The steps of each output's and each input gradient's arithmetic, one value
// at a time: the functions below take a plane's window in row-major order
// through them, and the GPU's vector kernels (kernels/pool2d.cu) take the same
// values in the same order through them, 8 channels at once, so every path
// gives the same bits.

// A max pool's running winner: starts at the window's first value, and a later
// value replaces it only when greater (NaN never wins unless it comes first,
// as the comparison says), so ties go to the first maximum.
struct MaxPick {
  float best;
  std::uint32_t at;
  RT_HD void offer(float v, std::uint32_t i) {
    if (v > best) {
      best = v;
      at = i;
    }
  }
};

// An average's divisor, as its reciprocal: the kernel's area (padding counts).
RT_HD float pool_inv_area(PoolShape s) {
  return 1.0f / static_cast<float>(s.kernel * s.kernel);
}

// An average pool's output from its window's sum, taken from 0.0f in order.
RT_HD float avg_pool_mean(float sum, PoolShape s) {
  return sum * pool_inv_area(s);
}

// One covering output's term of a max pool's input gradient: its dy where
// the input is its argmax.
RT_HD void max_pool_grad_add(float& acc, std::int32_t argmax, std::int32_t self, float dy) {
  if (argmax == self) acc += dy;
}

// One covering output's term of an average pool's input gradient, rounded
// before the sum: the device must not fuse it into an FMA, or an average's
// gradient would differ from the CPU's in the last bit.
RT_HD void avg_pool_grad_add(float& acc, float dy, float inv_area) {
  acc += mul_rn(dy, inv_area);
}

// The output at the window rows x cols of a max pool over plane (the spans of
// pool_window_span); *argmax receives the winner's index.
template <typename Plane>
RT_HD float max_pool_output(const Plane& x, PoolShape s, PoolSpan rows, PoolSpan cols,
                            std::int32_t* argmax) {
  const std::uint32_t first = rows.begin * s.width + cols.begin;
  MaxPick pick{x[first], first};
  for (std::uint32_t r = rows.begin; r < rows.end; ++r)
    for (std::uint32_t c = cols.begin; c < cols.end; ++c)
      pick.offer(x[r * s.width + c], r * s.width + c);
  *argmax = static_cast<std::int32_t>(pick.at);
  return pick.best;
}

// The output at the window rows x cols of an average pool: the window's sum
// over the kernel's area.
template <typename Plane>
RT_HD float avg_pool_output(const Plane& x, PoolShape s, PoolSpan rows, PoolSpan cols) {
  float sum = 0.0f;
  for (std::uint32_t r = rows.begin; r < rows.end; ++r)
    for (std::uint32_t c = cols.begin; c < cols.end; ++c) sum += x[r * s.width + c];
  return avg_pool_mean(sum, s);
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
      max_pool_grad_add(acc, argmax[oh * s.out_width + ow], self, dy[oh * s.out_width + ow]);
  return acc;
}

// dx of an average pool at an input whose covering outputs are rows x cols:
// each covering window's dy / k^2.
template <typename Plane>
RT_HD float avg_pool_input_grad(const Plane& dy, PoolShape s, PoolSpan rows, PoolSpan cols) {
  const float inv_area = pool_inv_area(s);
  float acc = 0.0f;
  for (std::uint32_t oh = rows.begin; oh < rows.end; ++oh)
    for (std::uint32_t ow = cols.begin; ow < cols.end; ++ow)
      avg_pool_grad_add(acc, dy[oh * s.out_width + ow], inv_area);
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
