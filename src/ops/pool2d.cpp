#include "ringtrain/ops/pool2d.h"

#include <algorithm>
#include <cstddef>
#include <cstring>

#include "kernels/layout.cuh"
#include "ops/gpu_ops.h"
#include "ringtrain/core/check.h"

namespace ringtrain {

namespace {

// One channel of one sample: pixel i at p[i * pixel] (pixel is 1 in NCHW, C
// in NHWC), so one loop serves both layouts, with the same arithmetic.
template <typename T>
struct StridedPlane {
  T* p;
  std::size_t pixel;
  template <typename I>
  T& operator[](I i) const {
    return p[static_cast<std::size_t>(i) * pixel];
  }
};

struct Strides {
  std::size_t channels, in_hw, out_hw, pixel;
  bool nhwc;
  std::size_t in_base(std::size_t plane) const { return base(plane, in_hw); }
  std::size_t out_base(std::size_t plane) const { return base(plane, out_hw); }
  std::size_t base(std::size_t plane, std::size_t hw) const {
    return nhwc ? kernels::nhwc_index(plane / channels, plane % channels, 0, channels, hw)
                : kernels::nchw_index(plane / channels, plane % channels, 0, channels, hw);
  }
};

Strides strides_of(const Pool2dGeometry& g) {
  const bool nhwc = g.layout == Layout::nhwc;
  return {g.channels, g.height * g.width, g.out_height() * g.out_width(), nhwc ? g.channels : 1,
          nhwc};
}

}  // namespace

void Pool2dGeometry::validate() const {
  RT_CHECK(channels > 0 && height > 0 && width > 0, "pool2d input must be non-empty, got {}x{}x{}",
           channels, height, width);
  RT_CHECK(kernel > 0 && stride > 0, "pool2d kernel ({}) and stride ({}) must be at least 1",
           kernel, stride);
  RT_CHECK(2 * padding <= kernel, "pool2d padding {} must be at most half the kernel {}", padding,
           kernel);
  RT_CHECK(kernel <= height + 2 * padding && kernel <= width + 2 * padding,
           "pool2d kernel {} does not fit the input {}x{} with padding {}", kernel, height, width,
           padding);
}

Pool2dOp::Pool2dOp(const ComputeContext& ctx, const Pool2dGeometry& geometry, std::size_t max_batch)
    : ctx_(ctx), g_(geometry), max_batch_(max_batch) {
  g_.validate();
  if (ctx.is_cuda())
    gpu_ = detail::make_gpu_pool_plan(detail::handles_of(ctx), g_);
  else if (g_.mode == PoolMode::max)
    argmax_ = Tensor::empty({max_batch * g_.channels * g_.out_height() * g_.out_width()},
                            DType::i32, Device::cpu());
}

Pool2dOp::~Pool2dOp() = default;

void Pool2dOp::forward(const float* x, float* y, std::size_t batch) {
  RT_CHECK(batch <= max_batch_, "pool2d batch {} exceeds the planned maximum {}", batch,
           max_batch_);
  if (batch == 0) return;
  if (gpu_) return gpu_->forward(x, y, batch);
  const auto H = static_cast<std::ptrdiff_t>(g_.height), W = static_cast<std::ptrdiff_t>(g_.width);
  const auto Ho = static_cast<std::ptrdiff_t>(g_.out_height()),
             Wo = static_cast<std::ptrdiff_t>(g_.out_width());
  const auto k = static_cast<std::ptrdiff_t>(g_.kernel), s = static_cast<std::ptrdiff_t>(g_.stride),
             p = static_cast<std::ptrdiff_t>(g_.padding);
  const bool average = g_.mode == PoolMode::average;
  const float inv_area = 1.0f / static_cast<float>(k * k);
  std::int32_t* arg = average ? nullptr : argmax_.data_as<std::int32_t>();
  const Strides st = strides_of(g_);
  for (std::size_t plane = 0; plane < batch * g_.channels; ++plane) {
    const StridedPlane in{x + st.in_base(plane), st.pixel};
    StridedPlane out{y + st.out_base(plane), st.pixel};
    for (std::ptrdiff_t oh = 0; oh < Ho; ++oh) {
      const std::ptrdiff_t r0 = std::max<std::ptrdiff_t>(oh * s - p, 0),
                           r1 = std::min<std::ptrdiff_t>(oh * s - p + k, H);
      for (std::ptrdiff_t ow = 0; ow < Wo; ++ow) {
        const std::ptrdiff_t c0 = std::max<std::ptrdiff_t>(ow * s - p, 0),
                             c1 = std::min<std::ptrdiff_t>(ow * s - p + k, W);
        if (average) {
          float sum = 0.0f;
          for (std::ptrdiff_t r = r0; r < r1; ++r)
            for (std::ptrdiff_t c = c0; c < c1; ++c) sum += in[r * W + c];
          out[oh * Wo + ow] = sum * inv_area;
          continue;
        }
        std::ptrdiff_t best_at = r0 * W + c0;
        float best = in[best_at];
        for (std::ptrdiff_t r = r0; r < r1; ++r)
          for (std::ptrdiff_t c = c0; c < c1; ++c)
            if (in[r * W + c] > best) {
              best = in[r * W + c];
              best_at = r * W + c;
            }
        out[oh * Wo + ow] = best;
        arg[plane * Ho * Wo + oh * Wo + ow] = static_cast<std::int32_t>(best_at);
      }
    }
  }
}

void Pool2dOp::backward(const float* x, const float* y, const float* dy, float* dx,
                        std::size_t batch) {
  RT_CHECK(batch <= max_batch_, "pool2d batch {} exceeds the planned maximum {}", batch,
           max_batch_);
  if (batch == 0) return;
  if (gpu_) return gpu_->backward(x, y, dy, dx, batch);
  const std::size_t in_plane = g_.height * g_.width, out_plane = g_.out_height() * g_.out_width();
  const Strides st = strides_of(g_);
  std::memset(dx, 0, sizeof(float) * batch * g_.channels * in_plane);
  if (g_.mode == PoolMode::average) {
    // Each output spreads dy / k^2 over the unpadded part of its window.
    const auto H = static_cast<std::ptrdiff_t>(g_.height),
               W = static_cast<std::ptrdiff_t>(g_.width);
    const auto Ho = static_cast<std::ptrdiff_t>(g_.out_height()),
               Wo = static_cast<std::ptrdiff_t>(g_.out_width());
    const auto k = static_cast<std::ptrdiff_t>(g_.kernel),
               s = static_cast<std::ptrdiff_t>(g_.stride),
               p = static_cast<std::ptrdiff_t>(g_.padding);
    const float inv_area = 1.0f / static_cast<float>(k * k);
    for (std::size_t plane = 0; plane < batch * g_.channels; ++plane) {
      StridedPlane d{dx + st.in_base(plane), st.pixel};
      const StridedPlane g{dy + st.out_base(plane), st.pixel};
      for (std::ptrdiff_t oh = 0; oh < Ho; ++oh) {
        const std::ptrdiff_t r0 = std::max<std::ptrdiff_t>(oh * s - p, 0),
                             r1 = std::min<std::ptrdiff_t>(oh * s - p + k, H);
        for (std::ptrdiff_t ow = 0; ow < Wo; ++ow) {
          const std::ptrdiff_t c0 = std::max<std::ptrdiff_t>(ow * s - p, 0),
                               c1 = std::min<std::ptrdiff_t>(ow * s - p + k, W);
          const float share = g[oh * Wo + ow] * inv_area;
          for (std::ptrdiff_t r = r0; r < r1; ++r)
            for (std::ptrdiff_t c = c0; c < c1; ++c) d[r * W + c] += share;
        }
      }
    }
    return;
  }
  // The argmax of the matching forward routes each output gradient to its input.
  const std::int32_t* arg = argmax_.data_as<std::int32_t>();
  for (std::size_t plane = 0; plane < batch * g_.channels; ++plane) {
    StridedPlane d{dx + st.in_base(plane), st.pixel};
    const StridedPlane g{dy + st.out_base(plane), st.pixel};
    const std::int32_t* a = arg + plane * out_plane;
    for (std::size_t i = 0; i < out_plane; ++i) d[a[i]] += g[i];
  }
}

void global_avg_pool_forward(const ComputeContext& ctx, const float* x, float* y,
                             std::size_t planes, std::size_t hw) {
  if (ctx.is_cuda()) return detail::gpu_global_avg_pool_forward(ctx.stream(), x, y, planes, hw);
  for (std::size_t p = 0; p < planes; ++p) {
    float acc = 0.0f;
    for (std::size_t i = 0; i < hw; ++i) acc += x[p * hw + i];
    y[p] = acc / static_cast<float>(hw);
  }
}

void global_avg_pool_backward(const ComputeContext& ctx, const float* dy, float* dx,
                              std::size_t planes, std::size_t hw) {
  if (ctx.is_cuda()) return detail::gpu_global_avg_pool_backward(ctx.stream(), dy, dx, planes, hw);
  for (std::size_t p = 0; p < planes; ++p)
    for (std::size_t i = 0; i < hw; ++i) dx[p * hw + i] = dy[p] / static_cast<float>(hw);
}

void global_avg_pool_nhwc_forward(const ComputeContext& ctx, const float* x, float* y,
                                  std::size_t batch, std::size_t channels, std::size_t hw) {
  if (ctx.is_cuda())
    return detail::gpu_global_avg_pool_nhwc_forward(ctx.stream(), x, y, batch, channels, hw);
  // Pixel by pixel for all channels at once (contiguous reads), each channel
  // still summed in pixel order, as the NCHW loop sums it.
  for (std::size_t n = 0; n < batch; ++n) {
    float* out = y + n * channels;
    for (std::size_t c = 0; c < channels; ++c) out[c] = 0.0f;
    for (std::size_t p = 0; p < hw; ++p)
      for (std::size_t c = 0; c < channels; ++c)
        out[c] += x[kernels::nhwc_index(n, c, p, channels, hw)];
    for (std::size_t c = 0; c < channels; ++c) out[c] /= static_cast<float>(hw);
  }
}

void global_avg_pool_nhwc_backward(const ComputeContext& ctx, const float* dy, float* dx,
                                   std::size_t batch, std::size_t channels, std::size_t hw) {
  if (ctx.is_cuda())
    return detail::gpu_global_avg_pool_nhwc_backward(ctx.stream(), dy, dx, batch, channels, hw);
  for (std::size_t n = 0; n < batch; ++n)
    for (std::size_t p = 0; p < hw; ++p)
      for (std::size_t c = 0; c < channels; ++c)
        dx[kernels::nhwc_index(n, c, p, channels, hw)] =
            dy[n * channels + c] / static_cast<float>(hw);
}

}  // namespace ringtrain
