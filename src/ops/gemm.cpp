#include "ringtrain/ops/gemm.h"

#include <cblas.h>

#include "ops/gpu_ops.h"
#include "ringtrain/core/check.h"
#include "ringtrain/ops/bias.h"
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

void gemm_stored_epilogue(const ComputeContext& ctx, bool trans_a, bool trans_b, std::size_t m,
                          std::size_t n, std::size_t k, BufferView a, std::size_t lda, BufferView b,
                          std::size_t ldb, float beta, BufferView d, std::size_t ldd,
                          const float* bias, float* db, bool accumulate_db) {
  RT_CHECK(ctx.is_cuda() && ctx.precision() != DType::f32,
           "a 16-bit product with an epilogue runs on a GPU under bf16/fp16 only");
  if (m == 0 || n == 0) return;
  if (k == 0) {  // no rows (a rank with no samples): D = beta D, db = 0 or kept
    RT_CHECK(bias == nullptr && ldd == n,
             "a 16-bit product {} x {} with k = 0 and a bias or a padded output", m, n);
    if (beta == 0.0f) device_zero(d.ptr, m * n * dtype_size(d.dtype), ctx.device());
    if (db != nullptr && !accumulate_db) device_zero(db, m * sizeof(float), ctx.device());
    return;
  }
  // The epilogue overwrites; an accumulated (or misaligned) bias gradient is
  // staged through the context's reduction scratch and added, which holds
  // kGpuScratchFloats. A wider one (never a real layer's: 2^18 features) is
  // reduced by bias_grad, from op(A) = dy stored [k, m].
  // Where cuBLASLt refuses the bias-gradient epilogue for the shape, too.
  const auto sums_apart = [&] {
    RT_CHECK(trans_a && lda == m,
             "a bias gradient of {} values reduced apart needs dy stored [k, m] (trans_a, lda = m)",
             m);
    bias_grad(ctx, a, db, k, m, 1, accumulate_db);
  };
  if (db != nullptr && m > detail::kGpuScratchFloats) {
    sums_apart();
    db = nullptr;
  }
  if (!detail::gpu_lt_gemm(detail::handles_of(ctx), trans_a, trans_b, m, n, k, a, lda, b, ldb, beta,
                           d, ldd, bias, db, accumulate_db))
    sums_apart();
}

std::size_t gemm_stored_bias_apart(const ComputeContext& ctx) {
  return ctx.is_cuda() ? detail::gpu_lt_gemm_bias_apart(detail::handles_of(ctx)) : 0;
}

std::size_t gemm_stored_sums_apart(const ComputeContext& ctx) {
  return ctx.is_cuda() ? detail::gpu_lt_gemm_sums_apart(detail::handles_of(ctx)) : 0;
}

namespace {
void require_stored_context(const ComputeContext& ctx) {
  RT_CHECK(ctx.is_cuda() && ctx.precision() != DType::f32,
           "a stored linear product runs on a GPU under bf16/fp16 only");
}
}  // namespace

// y = round16(x Wᵀ + b): one cuBLASLt GEMM whose epilogue adds the fp32 bias
// to the fp32 sum and stores y in 16 bits (one rounding, as before, with no
// fp32 copy of y between).
void linear_forward_stored(const ComputeContext& ctx, BufferView x, BufferView w, const float* b,
                           BufferView y, std::size_t rows, std::size_t in, std::size_t out) {
  require_stored_context(ctx);
  if (rows == 0) return;
  gemm_stored_epilogue(ctx, false, true, rows, out, in, x, in, w, in, 0.0f, y, out, b);
}

void linear_backward_stored(const ComputeContext& ctx, BufferView x, BufferView w, BufferView dy,
                            BufferView dx, float* dw, float* db, std::size_t rows, std::size_t in,
                            std::size_t out, bool accumulate) {
  require_stored_context(ctx);
  const Device d = ctx.device();
  if (rows == 0) {
    if (!accumulate) {
      device_zero(dw, sizeof(float) * out * in, d);
      if (db != nullptr) device_zero(db, sizeof(float) * out, d);
    }
    return;
  }
  // dW = dyᵀ x, both 16-bit in place, into the fp32 gradient (added to where
  // accumulating), and db = the column sums of dy in the same GEMM's epilogue.
  gemm_stored_epilogue(ctx, true, false, out, in, rows, dy, out, x, in, accumulate ? 1.0f : 0.0f,
                       view_of(dw, out * in, d), in, nullptr, db, accumulate);
  if (dx.ptr == nullptr) return;
  // dx = dy W straight into dx's dtype: 16 bits (rounded once by the GEMM's
  // store), or fp32 where the model sums it with another consumer's gradient.
  gemm_stored_epilogue(ctx, false, false, rows, in, out, dy, out, w, in, 0.0f, dx, in);
}

}  // namespace ringtrain
