// CPU loops call the same per-element functions as the CUDA kernels; they are
// plain counted loops over restrict pointers, so the compiler vectorises them.
#include "ringtrain/ops/activation.h"

#include <algorithm>
#include <cmath>

// glibc's vector expf (libmvec), declared as glibc's own headers declare it
// under -ffast-math: with errno off for this file (CMakeLists.txt) the loops
// over gelu_tanh call it 4 floats at a time, where the scalar expf took a
// fifth of a gpt-nano step. Its results stay within expf's few-ulp error.
extern "C" __attribute__((__simd__("notinbranch"))) float expf(float) noexcept;

#include "kernels/activation.cuh"
#include "kernels/storage.cuh"
#include "ops/gpu_ops.h"
#include "ringtrain/core/check.h"

namespace ringtrain {

void relu_forward(const ComputeContext& ctx, const float* x, float* y, std::size_t n) {
  if (ctx.is_cuda()) return detail::gpu_relu_forward(ctx.stream(), x, y, n);
  const float* __restrict__ xs = x;
  float* __restrict__ ys = y;
  for (std::size_t i = 0; i < n; ++i) ys[i] = kernels::relu_forward_element(xs[i]);
}

void relu_backward(const ComputeContext& ctx, const float* y, const float* dy, float* dx,
                   std::size_t n) {
  if (ctx.is_cuda()) return detail::gpu_relu_backward(ctx.stream(), y, dy, dx, n);
  const float* __restrict__ ys = y;
  const float* __restrict__ dys = dy;
  float* __restrict__ dxs = dx;
  for (std::size_t i = 0; i < n; ++i) dxs[i] = kernels::relu_backward_element(ys[i], dys[i]);
}

void relu_forward(const ComputeContext& ctx, BufferView x, BufferView y) {
  if (ctx.is_cuda()) return detail::gpu_relu_forward_stored(ctx.stream(), x, y);
  kernels::with_storage(y.dtype, [&](auto s) {
    using T = decltype(s);
    const T* __restrict__ xs = x.as<const T>();
    T* __restrict__ ys = y.as<T>();
    for (std::size_t i = 0; i < y.count; ++i)
      kernels::store(ys, i, kernels::relu_forward_element(kernels::load(xs, i)));
  });
}

void relu_backward(const ComputeContext& ctx, BufferView y, BufferView dy, BufferView dx) {
  if (ctx.is_cuda()) return detail::gpu_relu_backward_stored(ctx.stream(), y, dy, dx);
  kernels::with_storage_pair(dy.dtype, dx.dtype, [&](auto s, auto d) {
    using T = decltype(s);
    using D = decltype(d);
    const T* __restrict__ ys = y.as<const T>();
    const T* __restrict__ dys = dy.as<const T>();
    D* __restrict__ dxs = dx.as<D>();
    for (std::size_t i = 0; i < dx.count; ++i)
      kernels::store(dxs, i,
                     kernels::relu_backward_element(kernels::load(ys, i), kernels::load(dys, i)));
  });
}

namespace {
// The tanh GELU's fp32 loops, which vectorise (4 or 8 expf at a time through
// libmvec, whose last bit can differ from the scalar expf's): the typed forms
// widen chunks onto the stack and run these same loops, so that every storage
// computes the fp32 form's bits.
void gelu_tanh_forward_floats(const float* __restrict__ x, float* __restrict__ y, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) y[i] = kernels::gelu_tanh_forward_element(x[i]);
}
void gelu_tanh_backward_floats(const float* __restrict__ x, const float* __restrict__ dy,
                               float* __restrict__ dx, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) dx[i] = kernels::gelu_tanh_backward_element(x[i], dy[i]);
}
constexpr std::size_t kChunk = 512;
}  // namespace

void gelu_tanh_forward(const ComputeContext& ctx, BufferView x, BufferView y) {
  if (ctx.is_cuda()) return detail::gpu_gelu_tanh_forward_stored(ctx.stream(), x, y);
  kernels::with_storage(y.dtype, [&](auto s) {
    using T = decltype(s);
    const T* xs = x.as<const T>();
    T* ys = y.as<T>();
    float a[kChunk], out[kChunk];
    for (std::size_t at = 0; at < y.count; at += kChunk) {
      const std::size_t n = std::min(kChunk, y.count - at);
      for (std::size_t i = 0; i < n; ++i) a[i] = kernels::load(xs, at + i);
      gelu_tanh_forward_floats(a, out, n);
      for (std::size_t i = 0; i < n; ++i) kernels::store(ys, at + i, out[i]);
    }
  });
}

// The same chunks and fp32 loop as gelu_tanh_forward, reading the fp32 sum
// where that reads the stored (rounded) one.
void gelu_tanh_forward_with_aux(const ComputeContext& ctx, const float* pre, BufferView aux,
                                BufferView y) {
  RT_CHECK(!ctx.is_cuda(),
           "gelu_tanh_forward_with_aux is the CPU twin of cuBLASLt's GELU epilogue");
  RT_CHECK(aux.count == y.count, "gelu_tanh_forward_with_aux: {} auxiliary values for {} outputs",
           aux.count, y.count);
  kernels::with_storage_pair(aux.dtype, y.dtype, [&](auto a_type, auto y_type) {
    using A = decltype(a_type);
    using T = decltype(y_type);
    A* as = aux.as<A>();
    T* ys = y.as<T>();
    float a[kChunk], out[kChunk];
    for (std::size_t at = 0; at < y.count; at += kChunk) {
      const std::size_t n = std::min(kChunk, y.count - at);
      for (std::size_t i = 0; i < n; ++i) {
        a[i] = pre[at + i];
        kernels::store(as, at + i, a[i]);
      }
      gelu_tanh_forward_floats(a, out, n);
      for (std::size_t i = 0; i < n; ++i) kernels::store(ys, at + i, out[i]);
    }
  });
}

// gelu_tanh's backward over `count` values in kChunk runs through the fp32
// loop: pre-activations xs, the incoming gradient g(i), and put(i, value) of
// each result (one code for the stored gradient and the DGELU twin's fp32 one).
namespace {
template <typename T, typename Grad, typename Put>
void gelu_tanh_backward_runs(const T* xs, std::size_t count, Grad&& g_at, Put&& put) {
  float a[kChunk], g[kChunk], out[kChunk];
  for (std::size_t at = 0; at < count; at += kChunk) {
    const std::size_t n = std::min(kChunk, count - at);
    for (std::size_t i = 0; i < n; ++i) {
      a[i] = kernels::load(xs, at + i);
      g[i] = g_at(at + i);
    }
    gelu_tanh_backward_floats(a, g, out, n);
    for (std::size_t i = 0; i < n; ++i) put(at + i, out[i]);
  }
}
}  // namespace

void gelu_tanh_backward(const ComputeContext& ctx, BufferView x, BufferView dy, BufferView dx) {
  if (ctx.is_cuda()) return detail::gpu_gelu_tanh_backward_stored(ctx.stream(), x, dy, dx);
  kernels::with_storage_pair(dy.dtype, dx.dtype, [&](auto s, auto d) {
    using T = decltype(s);
    using D = decltype(d);
    const T* dys = dy.as<const T>();
    D* dxs = dx.as<D>();
    gelu_tanh_backward_runs(
        x.as<const T>(), dx.count, [&](std::size_t i) { return kernels::load(dys, i); },
        [&](std::size_t i, float v) { kernels::store(dxs, i, v); });
  });
}

// The same chunks and fp32 loop as gelu_tanh_backward, reading the fp32
// gradient where that reads the stored (rounded) one.
void gelu_tanh_backward_of_sum(const ComputeContext& ctx, BufferView pre, float* d,
                               BufferView d_pre) {
  RT_CHECK(!ctx.is_cuda(),
           "gelu_tanh_backward_of_sum is the CPU twin of cuBLASLt's DGELU epilogue");
  RT_CHECK(pre.count == d_pre.count,
           "gelu_tanh_backward_of_sum: {} pre-activations for {} gradients", pre.count,
           d_pre.count);
  kernels::with_storage_pair(pre.dtype, d_pre.dtype, [&](auto s, auto t) {
    using T = decltype(s);
    using D = decltype(t);
    D* dxs = d_pre.as<D>();
    gelu_tanh_backward_runs(
        pre.as<const T>(), d_pre.count, [&](std::size_t i) { return d[i]; },
        [&](std::size_t i, float v) {
          d[i] = v;
          kernels::store(dxs, i, v);
        });
  });
}

void gelu_forward(const ComputeContext& ctx, const float* x, float* y, std::size_t n) {
  if (ctx.is_cuda()) return detail::gpu_gelu_forward(ctx.stream(), x, y, n);
  for (std::size_t i = 0; i < n; ++i) y[i] = kernels::gelu_forward_element(x[i]);
}

void gelu_backward(const ComputeContext& ctx, const float* x, const float* dy, float* dx,
                   std::size_t n) {
  if (ctx.is_cuda()) return detail::gpu_gelu_backward(ctx.stream(), x, dy, dx, n);
  for (std::size_t i = 0; i < n; ++i) dx[i] = kernels::gelu_backward_element(x[i], dy[i]);
}

void gelu_tanh_forward(const ComputeContext& ctx, const float* x, float* y, std::size_t n) {
  if (ctx.is_cuda()) return detail::gpu_gelu_tanh_forward(ctx.stream(), x, y, n);
  gelu_tanh_forward_floats(x, y, n);
}

void gelu_tanh_backward(const ComputeContext& ctx, const float* x, const float* dy, float* dx,
                        std::size_t n) {
  if (ctx.is_cuda()) return detail::gpu_gelu_tanh_backward(ctx.stream(), x, dy, dx, n);
  gelu_tanh_backward_floats(x, dy, dx, n);
}

}  // namespace ringtrain
