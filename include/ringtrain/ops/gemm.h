// Row-major single-precision GEMM: C = alpha * op(A) * op(B) + beta * C, with
// C m x n and op(A) m x k. cblas_sgemm on the CPU, cublasSgemm on a GPU.
//
// `operands`: the grid A and B are on, when the caller knows that both hold
// values a mixed-precision model stored in bf16/fp16 (activations, activation
// gradients, the matmul weights' copy). On a GPU context whose precision is
// that one, the product then runs on exact 16-bit copies of A and B with fp32
// accumulation and an fp32 C (cublasGemmEx, tensor cores); anywhere else, and
// by default, it is the fp32 product of the same values.
#pragma once

#include <cstddef>

#include "ringtrain/core/dtype.h"
#include "ringtrain/ops/compute_context.h"

namespace ringtrain {

void gemm(const ComputeContext& ctx, bool trans_a, bool trans_b, std::size_t m, std::size_t n,
          std::size_t k, float alpha, const float* a, std::size_t lda, const float* b,
          std::size_t ldb, float beta, float* c, std::size_t ldc, DType operands = DType::f32);

// `batch` such GEMMs, the i-th on a + i * stride_a, b + i * stride_b and
// c + i * stride_c (the heads or samples of an attention): one cuBLAS call on
// a GPU, a loop of cblas_sgemm on the CPU.
void gemm_strided_batched(const ComputeContext& ctx, bool trans_a, bool trans_b, std::size_t m,
                          std::size_t n, std::size_t k, float alpha, const float* a,
                          std::size_t lda, std::size_t stride_a, const float* b, std::size_t ldb,
                          std::size_t stride_b, float beta, float* c, std::size_t ldc,
                          std::size_t stride_c, std::size_t batch);

}  // namespace ringtrain
