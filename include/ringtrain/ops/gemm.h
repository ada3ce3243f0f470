// Row-major single-precision GEMM: C = alpha * op(A) * op(B) + beta * C, with
// C m x n and op(A) m x k. cblas_sgemm on the CPU, cublasSgemm on a GPU.
#pragma once

#include <cstddef>

#include "ringtrain/ops/compute_context.h"

namespace ringtrain {

void gemm(const ComputeContext& ctx, bool trans_a, bool trans_b, std::size_t m, std::size_t n,
          std::size_t k, float alpha, const float* a, std::size_t lda, const float* b,
          std::size_t ldb, float beta, float* c, std::size_t ldc);

}  // namespace ringtrain
