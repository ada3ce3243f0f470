// A GPU compute context: a blocking stream (it orders with the legacy default
// stream, so plain cudaMemcpy by other layers stays safe) with cuBLAS and cuDNN
// handles bound to it, the reduction scratch; and GEMM through cuBLAS.
#include "core/cuda/check_cublas.h"
#include "core/cuda/check_cuda.h"
#include "core/cuda/check_cudnn.h"
#include "ops/gpu_ops.h"

namespace ringtrain::detail {

GpuHandles gpu_handles_create(int ordinal, Tf32Mode tf32) {
  RT_CUDA_CHECK(cudaSetDevice(ordinal));
  GpuHandles h;
  h.conv_tf32 = tf32_for_convolutions(tf32);
  try {
    cudaStream_t stream = nullptr;
    RT_CUDA_CHECK(cudaStreamCreate(&stream));
    h.stream = stream;
    cublasHandle_t blas = nullptr;
    RT_CUBLAS_CHECK(cublasCreate(&blas));
    h.blas = blas;
    RT_CUBLAS_CHECK(cublasSetStream(blas, stream));
    // TF32 GEMMs only when asked (--tf32 on): PyTorch's default leaves matmuls
    // in float (torch.backends.cuda.matmul.allow_tf32 = False), and so does
    // CUBLAS_DEFAULT_MATH, which is what PyTorch sets then. (The pedantic mode
    // would also forbid cuBLAS's other reduced-precision shortcuts, at a cost
    // in speed that PyTorch does not pay either.)
    RT_CUBLAS_CHECK(cublasSetMathMode(
        blas, tf32_for_gemm(tf32) ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH));
    cudnnHandle_t dnn = nullptr;
    RT_CUDNN_CHECK(cudnnCreate(&dnn));
    h.dnn = dnn;
    RT_CUDNN_CHECK(cudnnSetStream(dnn, stream));
    void* scratch = nullptr;
    RT_CUDA_CHECK(cudaMalloc(&scratch, kGpuScratchFloats * sizeof(float)));
    h.scratch = static_cast<float*>(scratch);
    h.conv_workspace = make_conv_workspace();
  } catch (...) {
    gpu_handles_destroy(h);
    throw;
  }
  return h;
}

void gpu_handles_destroy(const GpuHandles& h) noexcept {
  if (h.scratch != nullptr) (void)cudaFree(h.scratch);
  if (h.dnn != nullptr) (void)cudnnDestroy(static_cast<cudnnHandle_t>(h.dnn));
  if (h.blas != nullptr) (void)cublasDestroy(static_cast<cublasHandle_t>(h.blas));
  if (h.stream != nullptr) (void)cudaStreamDestroy(static_cast<cudaStream_t>(h.stream));
}

void gpu_stream_synchronize(void* stream) {
  RT_CUDA_CHECK(cudaStreamSynchronize(static_cast<cudaStream_t>(stream)));
}

void gpu_copy_to_host(void* dst, const void* src, std::size_t bytes, void* stream) {
  auto s = static_cast<cudaStream_t>(stream);
  RT_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, s));
  RT_CUDA_CHECK(cudaStreamSynchronize(s));
}

// Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: swap the
// operands and the m/n extents, keep the transpose flags.
void gpu_gemm(const GpuHandles& h, bool trans_a, bool trans_b, std::size_t m, std::size_t n,
              std::size_t k, float alpha, const float* a, std::size_t lda, const float* b,
              std::size_t ldb, float beta, float* c, std::size_t ldc) {
  RT_CUBLAS_CHECK(
      cublasSgemm(static_cast<cublasHandle_t>(h.blas), trans_b ? CUBLAS_OP_T : CUBLAS_OP_N,
                  trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, static_cast<int>(n), static_cast<int>(m),
                  static_cast<int>(k), &alpha, b, static_cast<int>(ldb), a, static_cast<int>(lda),
                  &beta, c, static_cast<int>(ldc)));
}

}  // namespace ringtrain::detail
