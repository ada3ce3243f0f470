#include "ringtrain/ops/gemm.h"

#include <cblas.h>

#include "ops/gpu_ops.h"

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

}  // namespace ringtrain
