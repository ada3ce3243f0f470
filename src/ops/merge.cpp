#include "ringtrain/ops/merge.h"

#include <cstring>

#include "kernels/axpy.cuh"
#include "kernels/precision.cuh"
#include "kernels/scale.cuh"
#include "kernels/storage.cuh"
#include "ops/gpu_ops.h"
#include "ringtrain/core/check.h"
#include "ringtrain/core/dtype.h"

namespace ringtrain {

void copy_floats(const ComputeContext& ctx, float* y, const float* x, std::size_t n) {
  if (n == 0 || y == x) return;
  if (ctx.is_cuda())
    return detail::gpu_copy_blocks(ctx.stream(), y, n * sizeof(float), x, n * sizeof(float),
                                   n * sizeof(float), 1);
  std::memcpy(y, x, n * sizeof(float));
}

void add_scaled(const ComputeContext& ctx, float* y, const float* x, float a, std::size_t n) {
  if (ctx.is_cuda()) return detail::gpu_axpy(ctx.stream(), a, x, y, n);
  float* __restrict__ ys = y;
  const float* __restrict__ xs = x;
  for (std::size_t i = 0; i < n; ++i) ys[i] = kernels::axpy_element(a, xs[i], ys[i]);
}

void sum_two_stored(const ComputeContext& ctx, float* y, const float* x0, const float* x1, float a,
                    std::size_t n) {
  const DType precision = ctx.precision();
  if (ctx.is_cuda()) return detail::gpu_axpy_rounded(ctx.stream(), a, x1, x0, y, n, precision);
  for (std::size_t i = 0; i < n; ++i)
    y[i] = kernels::round_to_precision_grid(kernels::axpy_element(a, x1[i], x0[i]), precision);
}

void sum_two_stored(const ComputeContext& ctx, BufferView y, BufferView x0, BufferView x1,
                    float a) {
  if (ctx.is_cuda()) return detail::gpu_sum_two_stored(ctx.stream(), y, x0, x1, a);
  kernels::with_storage(y.dtype, [&](auto s) {
    using T = decltype(s);
    // y may be x0 (in place): element i is read before it is written.
    const T* a0 = x0.as<const T>();
    const T* __restrict__ a1 = x1.as<const T>();
    T* out = y.as<T>();
    for (std::size_t i = 0; i < y.count; ++i)
      kernels::store(out, i, kernels::axpy_element(a, kernels::load(a1, i), kernels::load(a0, i)));
  });
}

void add_widened(const ComputeContext& ctx, BufferView y, BufferView x) {
  RT_CHECK(y.dtype == DType::f32 && x.count == y.count,
           "add_widened: {} {} values into {} {} ones: an fp32 sum of the same count expected",
           x.count, dtype_name(x.dtype), y.count, dtype_name(y.dtype));
  if (ctx.is_cuda()) return detail::gpu_add_widened(ctx.stream(), y, x);
  kernels::with_storage(x.dtype, [&](auto s) {
    using T = decltype(s);
    const T* __restrict__ in = x.as<const T>();
    float* __restrict__ out = y.as<float>();
    for (std::size_t i = 0; i < y.count; ++i)
      out[i] = kernels::axpy_element(1.0f, kernels::load(in, i), out[i]);
  });
}

void narrow_sum(const ComputeContext& ctx, BufferView narrowed, BufferView sum,
                std::span<const BufferView> terms) {
  RT_CHECK(sum.dtype == DType::f32 && narrowed.count == sum.count &&
               (narrowed.dtype == DType::bf16 || narrowed.dtype == DType::f16),
           "narrow_sum: an fp32 sum of {} values narrowed into {} {} ones: a 16-bit output of "
           "the same count expected",
           sum.count, narrowed.count, dtype_name(narrowed.dtype));
  RT_CHECK(!terms.empty() && terms.size() <= kNarrowSumMaxTerms,
           "narrow_sum: {} terms (1 to {} expected)", terms.size(), kNarrowSumMaxTerms);
  for (const BufferView& t : terms)
    RT_CHECK(t.dtype == terms[0].dtype && t.count == sum.count,
             "narrow_sum: a term of {} {} values beside {} {} ones: one dtype and sum's count "
             "expected",
             t.count, dtype_name(t.dtype), terms[0].count, dtype_name(terms[0].dtype));
  if (sum.count == 0) return;
  if (ctx.is_cuda()) return detail::gpu_narrow_sum(ctx.stream(), narrowed, sum, terms);
  kernels::with_storage_pair(terms[0].dtype, narrowed.dtype, [&](auto t, auto d) {
    using T = decltype(t);
    using D = decltype(d);
    const T* in[kNarrowSumMaxTerms] = {};
    for (std::size_t k = 0; k < terms.size(); ++k) in[k] = terms[k].as<const T>();
    const float* __restrict__ acc0 = sum.as<const float>();
    D* __restrict__ out = narrowed.as<D>();
    for (std::size_t i = 0; i < sum.count; ++i) {
      float acc = acc0[i];
      for (std::size_t k = 0; k < terms.size(); ++k)
        acc = kernels::axpy_element(1.0f, kernels::load(in[k], i), acc);
      kernels::store(out, i, acc);
    }
  });
}

void scale_stored(const ComputeContext& ctx, BufferView y, BufferView x, float a) {
  if (ctx.is_cuda()) return detail::gpu_scale_stored(ctx.stream(), y, x, a);
  kernels::with_storage_pair(x.dtype, y.dtype, [&](auto s, auto d) {
    using T = decltype(s);
    using D = decltype(d);
    const T* __restrict__ in = x.as<const T>();
    D* __restrict__ out = y.as<D>();
    for (std::size_t i = 0; i < y.count; ++i)
      kernels::store(out, i, kernels::scale_element(kernels::load(in, i), a));
  });
}

void zero_stored(const ComputeContext& ctx, BufferView y) {
  if (y.count == 0) return;
  if (ctx.is_cuda()) return detail::gpu_zero(ctx.stream(), y.ptr, y.bytes());
  std::memset(y.ptr, 0, y.bytes());
}

void scale_floats(const ComputeContext& ctx, float* x, std::size_t n, float a) {
  if (a == 1.0f) return;
  if (ctx.is_cuda()) return detail::gpu_scale(ctx.stream(), x, n, a);
  for (std::size_t i = 0; i < n; ++i) x[i] = kernels::scale_element(x[i], a);
}

void copy_blocks(const ComputeContext& ctx, float* dst, std::size_t dst_pitch, const float* src,
                 std::size_t src_pitch, std::size_t width, std::size_t rows) {
  if (ctx.is_cuda())
    return detail::gpu_copy_blocks(ctx.stream(), dst, dst_pitch * sizeof(float), src,
                                   src_pitch * sizeof(float), width * sizeof(float), rows);
  for (std::size_t r = 0; r < rows; ++r)
    std::memcpy(dst + r * dst_pitch, src + r * src_pitch, width * sizeof(float));
}

void copy_blocks(const ComputeContext& ctx, BufferView dst, std::size_t dst_pitch, BufferView src,
                 std::size_t src_pitch, std::size_t width, std::size_t rows) {
  if (dst.dtype == src.dtype) {
    const std::size_t e = dtype_size(dst.dtype);
    if (ctx.is_cuda())
      return detail::gpu_copy_blocks(ctx.stream(), dst.ptr, dst_pitch * e, src.ptr, src_pitch * e,
                                     width * e, rows,
                                     dst.device.is_cuda() && dst.device == src.device);
    for (std::size_t r = 0; r < rows; ++r)
      std::memcpy(static_cast<char*>(dst.ptr) + r * dst_pitch * e,
                  static_cast<const char*>(src.ptr) + r * src_pitch * e, width * e);
    return;
  }
  if (ctx.is_cuda())
    return detail::gpu_convert_blocks(ctx.stream(), dst, dst_pitch, src, src_pitch, width, rows);
  kernels::with_storage_pair(src.dtype, dst.dtype, [&](auto s, auto d) {
    using T = decltype(s);
    using D = decltype(d);
    const T* in = src.as<const T>();
    D* out = dst.as<D>();
    for (std::size_t r = 0; r < rows; ++r)
      for (std::size_t i = 0; i < width; ++i)
        kernels::store(out, r * dst_pitch + i, kernels::load(in, r * src_pitch + i));
  });
}

}  // namespace ringtrain
