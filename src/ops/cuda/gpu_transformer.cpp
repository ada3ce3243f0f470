// The GPU halves of the transformer ops: forwards to kernels/transformer.h and
// kernels/activation.h, the batched GEMM through cuBLAS, fills on the
// context's stream.
#include <cuda_runtime.h>

#include "core/cuda/check_cublas.h"
#include "core/cuda/check_cuda.h"
#include "kernels/activation.h"
#include "kernels/layer_norm_param_grad.h"
#include "kernels/transformer.h"
#include "ops/gpu_ops.h"

namespace ringtrain::detail {

void gpu_gelu_tanh_forward(void* stream, const float* x, float* y, std::size_t n) {
  kernels::gelu_tanh_forward_cuda(x, y, n, stream);
}
void gpu_gelu_tanh_backward(void* stream, const float* x, const float* dy, float* dx,
                            std::size_t n) {
  kernels::gelu_tanh_backward_cuda(x, dy, dx, n, stream);
}

// As gpu_gemm: row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T.
void gpu_gemm_strided_batched(const GpuHandles& h, bool trans_a, bool trans_b, std::size_t m,
                              std::size_t n, std::size_t k, float alpha, const float* a,
                              std::size_t lda, std::size_t stride_a, const float* b,
                              std::size_t ldb, std::size_t stride_b, float beta, float* c,
                              std::size_t ldc, std::size_t stride_c, std::size_t batch) {
  if (batch == 0 || m == 0 || n == 0) return;
  RT_CUBLAS_CHECK(cublasSgemmStridedBatched(
      static_cast<cublasHandle_t>(h.blas), trans_b ? CUBLAS_OP_T : CUBLAS_OP_N,
      trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, static_cast<int>(n), static_cast<int>(m),
      static_cast<int>(k), &alpha, b, static_cast<int>(ldb), static_cast<long long>(stride_b), a,
      static_cast<int>(lda), static_cast<long long>(stride_a), &beta, c, static_cast<int>(ldc),
      static_cast<long long>(stride_c), static_cast<int>(batch)));
}

void gpu_token_embedding_forward(void* stream, const float* ids, const float* w, std::size_t rows,
                                 std::size_t vocab, std::size_t dim, BufferView y) {
  kernels::token_embedding_forward_cuda(ids, w, rows, vocab, dim, y.ptr, y.dtype, stream);
}
std::size_t gpu_token_embedding_backward_workspace_bytes(std::size_t rows, std::size_t vocab) {
  return kernels::token_embedding_backward_workspace_bytes(rows, vocab);
}
void gpu_token_embedding_backward(void* stream, const float* ids, BufferView dy, std::size_t rows,
                                  std::size_t vocab, std::size_t dim, float* dw, bool accumulate,
                                  void* workspace, std::size_t workspace_bytes) {
  kernels::token_embedding_backward_cuda(ids, dy.ptr, dy.dtype, rows, vocab, dim, dw, accumulate,
                                         workspace, workspace_bytes, stream);
}
void gpu_add_broadcast_rows(void* stream, const float* x, const float* w, float* y,
                            std::size_t batch, std::size_t n) {
  kernels::add_broadcast_rows_cuda(x, w, y, batch, n, stream);
}
void gpu_layer_norm_forward(void* stream, BufferView x, const float* w, const float* b,
                            std::size_t rows, std::size_t c, float eps, BufferView y, float* mean,
                            float* rstd) {
  kernels::layer_norm_forward_cuda(x.ptr, y.dtype, w, b, rows, c, eps, y.ptr, mean, rstd, stream);
}
void gpu_layer_norm_backward(void* stream, BufferView x, const float* w, BufferView dy,
                             std::size_t rows, std::size_t c, const float* mean, const float* rstd,
                             BufferView dx) {
  kernels::layer_norm_backward_cuda(x.ptr, dy.dtype, w, dy.ptr, rows, c, mean, rstd, dx.ptr,
                                    dx.dtype, stream);
}
void gpu_layer_norm_param_grad(const GpuHandles& h, BufferView x, BufferView dy, std::size_t rows,
                               std::size_t c, const float* mean, const float* rstd, float* dw,
                               float* db, bool accumulate) {
  kernels::layer_norm_param_grad_cuda(x.ptr, dy.ptr, dy.dtype, mean, rstd, rows, c, dw, db,
                                      accumulate, h.scratch, kGpuScratchFloats, h.stream);
}
void gpu_causal_softmax_forward(void* stream, const float* s, float* p, std::size_t matrices,
                                std::size_t t) {
  kernels::causal_softmax_forward_cuda(s, p, matrices, t, stream);
}
void gpu_causal_softmax_backward(void* stream, const float* p, const float* dp, float* ds,
                                 std::size_t matrices, std::size_t t, float scale) {
  kernels::causal_softmax_backward_cuda(p, dp, ds, matrices, t, scale, stream);
}
void gpu_zero(void* stream, void* dst, std::size_t bytes) {
  if (bytes == 0) return;
  RT_CUDA_CHECK(cudaMemsetAsync(dst, 0, bytes, static_cast<cudaStream_t>(stream)));
}
void gpu_fill_bytes(void* stream, void* dst, std::size_t bytes, unsigned char value) {
  if (bytes == 0) return;
  RT_CUDA_CHECK(cudaMemsetAsync(dst, value, bytes, static_cast<cudaStream_t>(stream)));
}

}  // namespace ringtrain::detail
