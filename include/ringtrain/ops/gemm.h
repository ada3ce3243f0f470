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

#include "ringtrain/core/buffer_view.h"
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

// C = alpha op(A) op(B) + beta C with A and B views of the context's 16-bit
// dtype, read in place (cublasGemmEx, tensor cores), and C fp32: on a GPU
// under bf16/fp16 only (an Error elsewhere). Row-major, as gemm.
void gemm_stored(const ComputeContext& ctx, bool trans_a, bool trans_b, std::size_t m,
                 std::size_t n, std::size_t k, float alpha, BufferView a, std::size_t lda,
                 BufferView b, std::size_t ldb, float beta, float* c, std::size_t ldc);

// D = op(A) op(B) + beta D with A and B views of the context's 16-bit dtype
// read in place, fp32 accumulation, and D a view of that dtype (the fp32 sum
// rounded once, by the GEMM's own store: no fp32 copy) or fp32 (beta may then
// be 1): cuBLASLt on a GPU under bf16/fp16 only (an Error elsewhere).
// Row-major, as gemm. Its epilogue adds the fp32 bias [n] to every row before
// the rounding (bias non-null), or writes db [m] = the sums of op(A)'s rows
// over k (db non-null: the bias gradient of dW = dyᵀ x), added to db where
// accumulate_db.
void gemm_stored_epilogue(const ComputeContext& ctx, bool trans_a, bool trans_b, std::size_t m,
                          std::size_t n, std::size_t k, BufferView a, std::size_t lda, BufferView b,
                          std::size_t ldb, float beta, BufferView d, std::size_t ldd,
                          const float* bias = nullptr, float* db = nullptr,
                          bool accumulate_db = false);

// How many product shapes of the context had cuBLASLt refuse the fp32 bias
// epilogue with a 16-bit output (the bias then added by ringtrain's kernel
// after an fp32 product: the same numbers, one more pass), for the kernels
// column; 0 on the CPU.
std::size_t gemm_stored_bias_apart(const ComputeContext& ctx);
// How many had it refuse the bias-gradient epilogue (the sums then reduced by
// bias_grad after the product); 0 on the CPU.
std::size_t gemm_stored_sums_apart(const ComputeContext& ctx);

// A linear layer's products on the model's 16-bit activations, on a GPU
// under bf16/fp16 (an Error elsewhere: the CPU runs the fp32 products of the
// widened values through the model's adapter). x [rows, in] and y [rows, out]
// are views of the context's 16-bit dtype, read and written by cuBLAS with no
// cast; W [out, in] is the layer's 16-bit copy of its weights (made once per
// forward), b [out] fp32 or null. Forward is one cuBLASLt GEMM: x Wᵀ summed in
// fp32, b added in fp32 by its epilogue, and y stored in 16 bits, rounded
// once, as the fp32 path rounds.
void linear_forward_stored(const ComputeContext& ctx, BufferView x, BufferView w, const float* b,
                           BufferView y, std::size_t rows, std::size_t in, std::size_t out);
// db and dW = dyᵀ x in fp32 (overwritten, or added to when accumulate), db
// by that GEMM's bias-gradient epilogue; dx = dy W written by the GEMM in
// dx's dtype (16-bit, or fp32 where the model sums; a null ptr: not wanted).
void linear_backward_stored(const ComputeContext& ctx, BufferView x, BufferView w, BufferView dy,
                            BufferView dx, float* dw, float* db, std::size_t rows, std::size_t in,
                            std::size_t out, bool accumulate);

}  // namespace ringtrain
