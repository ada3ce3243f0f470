#include "ringtrain/ops/precision.h"

#include <algorithm>
#include <type_traits>

#include "kernels/precision.cuh"
#include "kernels/storage.cuh"
#include "ops/gpu_ops.h"
#include "ringtrain/core/buffer_copy.h"
#include "ringtrain/core/check.h"

namespace ringtrain {

DType parse_precision(std::string_view text) {
  if (text == "fp32") return DType::f32;
  if (text == "bf16") return DType::bf16;
  if (text == "fp16") return DType::f16;
  RT_CHECK(false, "--precision: unknown value '{}' (expected fp32, bf16 or fp16)", text);
  __builtin_unreachable();
}

const char* precision_name(DType p) {
  RT_CHECK(is_compute_precision(p), "{} is not a --precision (fp32, bf16 or fp16)", dtype_name(p));
  return p == DType::bf16 ? "bf16" : p == DType::f16 ? "fp16" : "fp32";
}

void round_to_precision(const ComputeContext& ctx, float* y, const float* x, std::size_t n,
                        DType p) {
  if (n == 0) return;
  if (ctx.is_cuda()) return detail::gpu_round_to_precision(ctx.stream(), y, x, n, p);
  // One loop per grid, so that the compiler vectorizes each (a dtype test per
  // element kept it scalar); the same function per element, the same bits.
  if (p == DType::bf16) {
    for (std::size_t i = 0; i < n; ++i) y[i] = kernels::round_to_bf16_grid(x[i]);
  } else if (p == DType::f16) {
    for (std::size_t i = 0; i < n; ++i) y[i] = kernels::round_to_fp16_grid(x[i]);
  } else if (y != x) {
    std::copy(x, x + n, y);
  }
}

void convert_storage(const ComputeContext& ctx, BufferView dst, BufferView src) {
  RT_CHECK(dst.count == src.count, "convert_storage: {} elements into {}", src.count, dst.count);
  RT_CHECK(is_compute_precision(dst.dtype) && is_compute_precision(src.dtype) &&
               (dst.dtype == src.dtype || dst.dtype == DType::f32 || src.dtype == DType::f32),
           "convert_storage: {} into {} is not a storage conversion", dtype_name(src.dtype),
           dtype_name(dst.dtype));
  const std::size_t n = src.count;
  if (n == 0) return;
  // Same dtype: a copy in the stream's order (copy_view would wait for the
  // device).
  if (dst.dtype == src.dtype) {
    if (!ctx.is_cuda()) return copy_view(dst, src);
    if (dst.ptr != src.ptr)
      detail::gpu_copy_blocks(ctx.stream(), dst.ptr, dst.bytes(), src.ptr, src.bytes(), src.bytes(),
                              1);
    return;
  }
  if (ctx.is_cuda()) {
    if (dst.dtype == DType::f32)
      return detail::gpu_from_precision_bits(ctx.stream(), dst.as<float>(), src.as<std::uint16_t>(),
                                             n, src.dtype);
    return detail::gpu_to_precision_bits(ctx.stream(), dst.as<std::uint16_t>(), src.as<float>(), n,
                                         dst.dtype);
  }
  kernels::with_storage_pair(dst.dtype, src.dtype, [&](auto d, auto s) {
    using D = decltype(d);
    using S = decltype(s);
    D* __restrict__ y = dst.as<D>();
    const S* __restrict__ x = src.as<const S>();
    for (std::size_t i = 0; i < n; ++i) kernels::store(y, i, kernels::load(x, i));
  });
}

}  // namespace ringtrain
