#include "ringtrain/ops/gemm.h"

#include <cblas.h>

#include "ops/gpu_ops.h"
#include "ringtrain/core/check.h"
#include "ringtrain/ops/bias.h"
#include "ringtrain/ops/precision.h"
#include "ringtrain/tensor/device_memory.h"

namespace ringtrain {

void gemm(const ComputeContext& ctx, bool trans_a, bool trans_b, std::size_t m, std::size_t n,
          std::size_t k, float alpha, const float* a, std::size_t lda, const float* b,
          std::size_t ldb, float beta, float* c, std::size_t ldc, DType operands) {
  if (m == 0 || n == 0) return;
  if (ctx.is_cuda()) {
    // 16-bit inputs only where the caller vouches for the grid and the
    // context computes in it: a cast of an off-grid value would round it.
    const bool sixteen_bit = operands != DType::f32 && operands == ctx.precision() && k > 0;
    detail::gpu_gemm(detail::handles_of(ctx), trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb,
                     beta, c, ldc, sixteen_bit ? operands : DType::f32);
    return;
  }
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
              trans_b ? CblasTrans : CblasNoTrans, static_cast<blasint>(m), static_cast<blasint>(n),
              static_cast<blasint>(k), alpha, a, static_cast<blasint>(lda), b,
              static_cast<blasint>(ldb), beta, c, static_cast<blasint>(ldc));
}

void gemm_strided_batched(const ComputeContext& ctx, bool trans_a, bool trans_b, std::size_t m,
                          std::size_t n, std::size_t k, float alpha, const float* a,
                          std::size_t lda, std::size_t stride_a, const float* b, std::size_t ldb,
                          std::size_t stride_b, float beta, float* c, std::size_t ldc,
                          std::size_t stride_c, std::size_t batch) {
  if (ctx.is_cuda()) {
    detail::gpu_gemm_strided_batched(detail::handles_of(ctx), trans_a, trans_b, m, n, k, alpha, a,
                                     lda, stride_a, b, ldb, stride_b, beta, c, ldc, stride_c,
                                     batch);
    return;
  }
  for (std::size_t i = 0; i < batch; ++i)
    gemm(ctx, trans_a, trans_b, m, n, k, alpha, a + i * stride_a, lda, b + i * stride_b, ldb, beta,
         c + i * stride_c, ldc);
}

void gemm_stored(const ComputeContext& ctx, bool trans_a, bool trans_b, std::size_t m,
                 std::size_t n, std::size_t k, float alpha, BufferView a, std::size_t lda,
                 BufferView b, std::size_t ldb, float beta, float* c, std::size_t ldc) {
  RT_CHECK(ctx.is_cuda() && ctx.precision() != DType::f32,
           "a 16-bit product in place runs on a GPU under bf16/fp16 only");
  RT_CHECK(a.dtype == ctx.precision() && b.dtype == ctx.precision(),
           "a 16-bit product of {} and {} on a {} context", dtype_name(a.dtype),
           dtype_name(b.dtype), dtype_name(ctx.precision()));
  if (m == 0 || n == 0) return;
  detail::gpu_gemm_stored(detail::handles_of(ctx), trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb,
                          beta, c, ldc);
}

namespace {
// The context's fp32 widening scratch (reserved at model build), for `n` values.
float* wide_output(const ComputeContext& ctx, std::size_t n) {
  RT_CHECK(ctx.is_cuda() && ctx.precision() != DType::f32,
           "a stored linear product runs on a GPU under bf16/fp16 only");
  const detail::GpuHandles& h = detail::handles_of(ctx);
  RT_CHECK(n <= h.wide_capacity,
           "a stored linear product of {} values exceeds the widening scratch of {} reserved at "
           "model build",
           n, h.wide_capacity);
  return h.wide_scratch[0];
}
}  // namespace

void linear_forward_stored(const ComputeContext& ctx, BufferView x, BufferView w, const float* b,
                           BufferView y, std::size_t rows, std::size_t in, std::size_t out) {
  if (rows == 0) return;
  float* c = wide_output(ctx, rows * out);
  const Device d = ctx.device();
  detail::gpu_gemm_stored(detail::handles_of(ctx), false, true, rows, out, in, 1.0f, x, in, w, in,
                          0.0f, c, out);
  const BufferView product = view_of(c, rows * out, d);
  if (b != nullptr)
    bias_add_into(ctx, y, product, b, rows, out, 1);
  else
    convert_storage(ctx, y, product);
}

void linear_backward_stored(const ComputeContext& ctx, BufferView x, BufferView w, BufferView dy,
                            BufferView dx, float* dw, float* db, std::size_t rows, std::size_t in,
                            std::size_t out, bool accumulate) {
  const Device d = ctx.device();
  if (rows == 0) {
    if (!accumulate) {
      device_zero(dw, sizeof(float) * out * in, d);
      if (db != nullptr) device_zero(db, sizeof(float) * out, d);
    }
    return;
  }
  if (db != nullptr) bias_grad(ctx, dy, db, rows, out, 1, accumulate);
  const detail::GpuHandles& h = detail::handles_of(ctx);
  // dW = dy^T x, both 16-bit in place, into the fp32 gradient.
  detail::gpu_gemm_stored(h, true, false, out, in, rows, 1.0f, dy, out, x, in,
                          accumulate ? 1.0f : 0.0f, dw, in);
  if (dx.ptr == nullptr) return;
  // dx = dy W: straight into an fp32 dx, else through the scratch, rounded once.
  const bool wide = dx.dtype == DType::f32;
  float* c = wide ? dx.as<float>() : wide_output(ctx, rows * in);
  detail::gpu_gemm_stored(h, false, false, rows, in, out, 1.0f, dy, out, w, in, 0.0f, c, in);
  if (!wide) convert_storage(ctx, dx, view_of(c, rows * in, d));
}

}  // namespace ringtrain
