#include "ringtrain/ops/pool2d.h"

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <vector>

#include "kernels/layout.cuh"
#include "kernels/pool2d.cuh"
#include "kernels/storage.cuh"
#include "ops/gpu_ops.h"
#include "ringtrain/core/check.h"

namespace ringtrain {

namespace {

// Offset of plane (sample, channel) within a tensor of plane_pixels pixels a
// plane, in the geometry's layout.
std::size_t plane_base(const Pool2dGeometry& g, std::size_t plane, std::size_t plane_pixels) {
  return g.layout == Layout::nhwc ? kernels::nhwc_index(plane / g.channels, plane % g.channels, 0,
                                                        g.channels, plane_pixels)
                                  : kernels::nchw_index(plane / g.channels, plane % g.channels, 0,
                                                        g.channels, plane_pixels);
}

// The kernels' 32-bit view (validate() keeps a plane's indices in range).
kernels::PoolShape shape_of(const Pool2dGeometry& g) {
  const auto u = [](std::size_t v) { return static_cast<std::uint32_t>(v); };
  return {u(g.height), u(g.width),  u(g.out_height()), u(g.out_width()),
          u(g.kernel), u(g.stride), u(g.padding)};
}

std::uint32_t pixel_stride(const Pool2dGeometry& g) {
  return g.layout == Layout::nhwc ? static_cast<std::uint32_t>(g.channels) : 1u;
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
  RT_CHECK((height + 2 * padding) * (width + 2 * padding) <= INT32_MAX,
           "pool2d input plane {}x{} is too large (its indices are 32-bit)", height, width);
}

Pool2dOp::Pool2dOp(const ComputeContext& ctx, const Pool2dGeometry& geometry, std::size_t max_batch)
    : ctx_(ctx), g_(geometry), max_batch_(max_batch) {
  g_.validate();
  if (g_.mode == PoolMode::max)
    argmax_ = Tensor::empty({max_batch * g_.channels * g_.out_height() * g_.out_width()},
                            DType::i32, ctx.device());
}

Pool2dOp::~Pool2dOp() = default;

void Pool2dOp::forward(const float* x, float* y, std::size_t batch) {
  const std::size_t in = g_.channels * g_.height * g_.width;
  const std::size_t out = g_.channels * g_.out_height() * g_.out_width();
  forward(view_of(x, batch * in, ctx_.device()), view_of(y, batch * out, ctx_.device()), batch);
}

void Pool2dOp::backward(const float*, const float*, const float* dy, float* dx, std::size_t batch) {
  const std::size_t in = g_.channels * g_.height * g_.width;
  const std::size_t out = g_.channels * g_.out_height() * g_.out_width();
  backward(view_of(dy, batch * out, ctx_.device()), view_of(dx, batch * in, ctx_.device()), batch);
}

void Pool2dOp::forward(BufferView x, BufferView y, std::size_t batch) {
  RT_CHECK(batch <= max_batch_, "pool2d batch {} exceeds the planned maximum {}", batch,
           max_batch_);
  if (batch == 0) return;
  const bool max = g_.mode == PoolMode::max;
  std::int32_t* arg = max ? argmax_.data_as<std::int32_t>() : nullptr;
  const kernels::PoolShape s = shape_of(g_);
  if (ctx_.is_cuda())
    return detail::gpu_pool2d_forward(ctx_.stream(), s, g_.channels, max, g_.layout == Layout::nhwc,
                                      x, y, arg, batch);
  const std::size_t in_plane = g_.height * g_.width, out_plane = g_.out_height() * g_.out_width();
  const std::uint32_t pixel = pixel_stride(g_);
  kernels::with_storage(y.dtype, [&](auto storage) {
    using T = decltype(storage);
    const T* xs = x.as<const T>();
    T* ys = y.as<T>();
    for (std::size_t plane = 0; plane < batch * g_.channels; ++plane) {
      const kernels::StoredPlane<T> in{xs + plane_base(g_, plane, in_plane), pixel};
      const std::size_t out = plane_base(g_, plane, out_plane);
      for (std::uint32_t oh = 0; oh < s.out_height; ++oh) {
        const kernels::PoolSpan rows = kernels::pool_window_span(oh, s.height, s);
        for (std::uint32_t ow = 0; ow < s.out_width; ++ow) {
          const kernels::PoolSpan cols = kernels::pool_window_span(ow, s.width, s);
          const std::size_t o = out + std::size_t{oh * s.out_width + ow} * pixel;
          if (max)
            kernels::store(ys, o, kernels::max_pool_output(in, s, rows, cols, &arg[o]));
          else
            kernels::store(ys, o, kernels::avg_pool_output(in, s, rows, cols));
        }
      }
    }
  });
}

namespace {
// The CPU's backward into an fp32 dx: it scatters each output's gradient into
// its window (or its argmax), in output order, which gives the bits of the
// GPU's gather (kernels/pool2d.cuh: pool2d_test checks the two against each
// other) at a quarter of the gather's loop trips for 2 x 2 windows.
template <typename T>
void scatter_backward(const Pool2dGeometry& g, const kernels::PoolShape& s, const std::int32_t* arg,
                      const T* dy, float* dx, std::size_t batch) {
  const bool max = g.mode == PoolMode::max;
  const std::size_t in_plane = g.height * g.width, out_plane = g.out_height() * g.out_width();
  const std::uint32_t pixel = pixel_stride(g);
  std::memset(dx, 0, sizeof(float) * batch * g.channels * in_plane);
  const float inv_area = 1.0f / static_cast<float>(s.kernel * s.kernel);
  for (std::size_t plane = 0; plane < batch * g.channels; ++plane) {
    const std::size_t out = plane_base(g, plane, out_plane);
    const kernels::StridedPlane<float> d{dx + plane_base(g, plane, in_plane), pixel};
    if (max) {
      for (std::size_t i = 0; i < out_plane; ++i)
        d[static_cast<std::uint32_t>(arg[out + i * pixel])] += kernels::load(dy, out + i * pixel);
      continue;
    }
    for (std::uint32_t oh = 0; oh < s.out_height; ++oh) {
      const kernels::PoolSpan rows = kernels::pool_window_span(oh, s.height, s);
      for (std::uint32_t ow = 0; ow < s.out_width; ++ow) {
        const kernels::PoolSpan cols = kernels::pool_window_span(ow, s.width, s);
        const float share = kernels::mul_rn(
            kernels::load(dy, out + std::size_t{oh * s.out_width + ow} * pixel), inv_area);
        for (std::uint32_t r = rows.begin; r < rows.end; ++r)
          for (std::uint32_t c = cols.begin; c < cols.end; ++c) d[r * s.width + c] += share;
      }
    }
  }
}

// Into a 16-bit dx: each input's gradient gathered in fp32 from the outputs
// that cover it, as the GPU kernel does, and rounded once.
template <typename T, typename D>
void gather_backward(const Pool2dGeometry& g, const kernels::PoolShape& s, const std::int32_t* arg,
                     const T* dy, D* dx, std::size_t batch) {
  const bool max = g.mode == PoolMode::max;
  const std::size_t in_plane = g.height * g.width, out_plane = g.out_height() * g.out_width();
  const std::uint32_t pixel = pixel_stride(g);
  for (std::size_t plane = 0; plane < batch * g.channels; ++plane) {
    const std::size_t out = plane_base(g, plane, out_plane);
    const std::size_t in = plane_base(g, plane, in_plane);
    const kernels::StoredPlane<T> grad{dy + out, pixel};
    for (std::uint32_t h = 0; h < s.height; ++h) {
      const kernels::PoolSpan rows = kernels::pool_covering_span(h, s.out_height, s);
      for (std::uint32_t w = 0; w < s.width; ++w) {
        const kernels::PoolSpan cols = kernels::pool_covering_span(w, s.out_width, s);
        const std::size_t i = in + std::size_t{h * s.width + w} * pixel;
        if (max)
          kernels::store(dx, i,
                         kernels::max_pool_input_grad(
                             grad, kernels::StridedPlane<const std::int32_t>{arg + out, pixel}, s,
                             h, w, rows, cols));
        else
          kernels::store(dx, i, kernels::avg_pool_input_grad(grad, s, rows, cols));
      }
    }
  }
}
}  // namespace

void Pool2dOp::backward(BufferView dy, BufferView dx, std::size_t batch) {
  RT_CHECK(batch <= max_batch_, "pool2d batch {} exceeds the planned maximum {}", batch,
           max_batch_);
  if (batch == 0) return;
  const bool max = g_.mode == PoolMode::max;
  const std::int32_t* arg = max ? argmax_.data_as<std::int32_t>() : nullptr;
  const kernels::PoolShape s = shape_of(g_);
  if (ctx_.is_cuda())
    return detail::gpu_pool2d_backward(ctx_.stream(), s, g_.channels, max,
                                       g_.layout == Layout::nhwc, dy, arg, dx, batch);
  kernels::with_storage(dy.dtype, [&](auto storage) {
    using T = decltype(storage);
    if (dx.dtype == DType::f32)
      return scatter_backward(g_, s, arg, dy.as<const T>(), dx.as<float>(), batch);
    kernels::with_storage(dx.dtype, [&](auto dx_storage) {
      using D = decltype(dx_storage);
      gather_backward(g_, s, arg, dy.as<const T>(), dx.as<D>(), batch);
    });
  });
}

void global_avg_pool_forward(const ComputeContext& ctx, BufferView x, BufferView y,
                             std::size_t batch, std::size_t channels, std::size_t hw,
                             Layout layout) {
  const bool nhwc = layout == Layout::nhwc;
  if (ctx.is_cuda())
    return detail::gpu_global_avg_pool_forward(ctx.stream(), x, y, batch, channels, hw, nhwc);
  kernels::with_storage(y.dtype, [&](auto storage) {
    using T = decltype(storage);
    const T* xs = x.as<const T>();
    T* ys = y.as<T>();
    if (!nhwc) {
      for (std::size_t p = 0; p < batch * channels; ++p) {
        float acc = 0.0f;
        for (std::size_t i = 0; i < hw; ++i) acc += kernels::load(xs, p * hw + i);
        kernels::store(ys, p, acc / static_cast<float>(hw));
      }
      return;
    }
    // Pixel by pixel for all channels at once (contiguous reads), each channel
    // still summed in pixel order, as the NCHW loop sums it, into fp32 sums
    // kept per thread (a step allocates nothing once they have grown).
    thread_local std::vector<float> acc;
    if (acc.size() < channels) acc.resize(channels);
    for (std::size_t n = 0; n < batch; ++n) {
      std::fill_n(acc.begin(), channels, 0.0f);
      for (std::size_t p = 0; p < hw; ++p)
        for (std::size_t c = 0; c < channels; ++c)
          acc[c] += kernels::load(xs, kernels::nhwc_index(n, c, p, channels, hw));
      for (std::size_t c = 0; c < channels; ++c)
        kernels::store(ys, n * channels + c, acc[c] / static_cast<float>(hw));
    }
  });
}

void global_avg_pool_backward(const ComputeContext& ctx, BufferView dy, BufferView dx,
                              std::size_t batch, std::size_t channels, std::size_t hw,
                              Layout layout) {
  const bool nhwc = layout == Layout::nhwc;
  if (ctx.is_cuda())
    return detail::gpu_global_avg_pool_backward(ctx.stream(), dy, dx, batch, channels, hw, nhwc);
  kernels::with_storage_pair(dy.dtype, dx.dtype, [&](auto storage, auto dx_storage) {
    using T = decltype(storage);
    using D = decltype(dx_storage);
    const T* g = dy.as<const T>();
    D* out = dx.as<D>();
    for (std::size_t n = 0; n < batch; ++n)
      for (std::size_t c = 0; c < channels; ++c) {
        const float share = kernels::load(g, n * channels + c) / static_cast<float>(hw);
        for (std::size_t p = 0; p < hw; ++p)
          kernels::store(
              out, nhwc ? kernels::nhwc_index(n, c, p, channels, hw) : (n * channels + c) * hw + p,
              share);
      }
  });
}

}  // namespace ringtrain
