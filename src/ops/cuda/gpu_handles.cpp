// A GPU compute context: a blocking stream (it orders with the legacy default
// stream, so plain cudaMemcpy by other layers stays safe) with cuBLAS and cuDNN
// handles bound to it, the reduction scratch; and GEMM through cuBLAS (fp32,
// or 16-bit inputs on tensor cores under --precision bf16|fp16).
#include <utility>

#include "core/cuda/check_cublas.h"
#include "core/cuda/check_cuda.h"
#include "core/cuda/check_cudnn.h"
#include "core/stream_graph.h"
#include "kernels/precision.cuh"
#include "kernels/precision.h"
#include "ops/gpu_ops.h"
#include "ringtrain/core/check.h"
#include "tensor/cuda_memory.h"

namespace ringtrain::detail {

GpuHandles gpu_handles_create(int ordinal, Tf32Mode tf32, DType precision) {
  RT_CUDA_CHECK(cudaSetDevice(ordinal));
  GpuHandles h;
  h.conv_tf32 = tf32_for_convolutions(tf32);
  h.precision = precision;
  try {
    cudaStream_t stream = nullptr;
    RT_CUDA_CHECK(cudaStreamCreate(&stream));
    h.stream = stream;
    cublasHandle_t blas = nullptr;
    RT_CUBLAS_CHECK(cublasCreate(&blas));
    h.blas = blas;
    RT_CUBLAS_CHECK(cublasSetStream(blas, stream));
    // cuBLAS's recommendation for Hopper. Without a workspace of its own, a
    // GEMM captured into a CUDA graph allocates one inside the graph (CUDA
    // 12.2 and later), and may choose another kernel than eagerly.
    constexpr std::size_t kBlasWorkspaceBytes = std::size_t{32} << 20;
    h.blas_workspace = cuda_allocate_here(kBlasWorkspaceBytes);
    RT_CUBLAS_CHECK(cublasSetWorkspace(blas, h.blas_workspace, kBlasWorkspaceBytes));
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
    h.scratch = static_cast<float*>(cuda_allocate_here(kGpuScratchFloats * sizeof(float)));
    h.conv_workspace = make_conv_workspace();
    h.conv_graphs = make_conv_graph_cache();
    h.lt = make_lt_gemm_cache();
    h.widening = std::make_shared<WideningScratch>();
    h.attention = std::make_shared<std::shared_ptr<void>>();
  } catch (...) {
    gpu_handles_destroy(h);
    throw;
  }
  return h;
}

void gpu_to_precision_bits(void* stream, std::uint16_t* y, const float* x, std::size_t n,
                           DType precision) {
  kernels::to_precision_bits_cuda(y, x, n, precision, stream);
}
void gpu_from_precision_bits(void* stream, float* y, const std::uint16_t* x, std::size_t n,
                             DType precision) {
  kernels::from_precision_bits_cuda(y, x, n, precision, stream);
}

float* gpu_widening_buffer(const GpuHandles& h, int index, std::size_t floats) {
  RT_CHECK(h.widening != nullptr && index >= 0 && index < WideningScratch::kCount,
           "a widening buffer {} of a context without one", index);
  WideningScratch& w = *h.widening;
  const auto k = static_cast<std::size_t>(index);
  if (floats > w.capacity[k]) {
    // Work queued before may still read the old buffer.
    if (w.buffers[k] != nullptr) gpu_stream_synchronize(h.stream);
    cuda_free(std::exchange(w.buffers[k], nullptr), 0);
    w.capacity[k] = 0;
    w.buffers[k] = static_cast<float*>(cuda_allocate_here(floats * sizeof(float)));
    w.capacity[k] = floats;
    note_graph_buffers_moved();  // a captured graph may hold the old one
  }
  return w.buffers[k];
}

void gpu_handles_destroy(const GpuHandles& h) noexcept {
  // The cuDNN graphs (attention's, the convolutions') go before the handle
  // they were built on.
  if (h.attention != nullptr) h.attention->reset();
  release_conv_graphs(h);
  // cuda_free accounts for them (device_memory_use).
  if (h.widening != nullptr)
    for (float* p : h.widening->buffers)
      if (p != nullptr) cuda_free(p, 0);
  if (h.scratch != nullptr) cuda_free(h.scratch, 0);
  if (h.dnn != nullptr) (void)cudnnDestroy(static_cast<cudnnHandle_t>(h.dnn));
  if (h.blas != nullptr) (void)cublasDestroy(static_cast<cublasHandle_t>(h.blas));
  if (h.blas_workspace != nullptr) cuda_free(h.blas_workspace, 0);
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
//
// precision bf16/fp16 (the caller vouches that A and B are on its grid): TF32
// tensor cores, whatever --tf32 says, since TF32 holds every bf16 and fp16
// value exactly (11 significant bits, fp32's exponent range): the products
// are exact and accumulate in fp32, as on 16-bit tensor cores, without
// casting A and B into 16-bit copies first. The fast paths keep their
// operands in 16 bits (gpu_gemm_stored).
void gpu_gemm(const GpuHandles& h, bool trans_a, bool trans_b, std::size_t m, std::size_t n,
              std::size_t k, float alpha, const float* a, std::size_t lda, const float* b,
              std::size_t ldb, float beta, float* c, std::size_t ldc, DType precision) {
  const auto blas = static_cast<cublasHandle_t>(h.blas);
  const cublasOperation_t op_a = trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_b = trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  if (precision != DType::f32) {
    RT_CHECK(h.precision == precision, "16-bit GEMM in {} on a {} context", dtype_name(precision),
             dtype_name(h.precision));
    RT_CUBLAS_CHECK(cublasGemmEx(
        blas, op_b, op_a, static_cast<int>(n), static_cast<int>(m), static_cast<int>(k), &alpha, b,
        CUDA_R_32F, static_cast<int>(ldb), a, CUDA_R_32F, static_cast<int>(lda), &beta, c,
        CUDA_R_32F, static_cast<int>(ldc), CUBLAS_COMPUTE_32F_FAST_TF32, CUBLAS_GEMM_DEFAULT));
    return;
  }
  RT_CUBLAS_CHECK(cublasSgemm(blas, op_b, op_a, static_cast<int>(n), static_cast<int>(m),
                              static_cast<int>(k), &alpha, b, static_cast<int>(ldb), a,
                              static_cast<int>(lda), &beta, c, static_cast<int>(ldc)));
}

// Both operands in the context's 16-bit dtype, read in place.
void gpu_gemm_stored(const GpuHandles& h, bool trans_a, bool trans_b, std::size_t m, std::size_t n,
                     std::size_t k, float alpha, BufferView a, std::size_t lda, BufferView b,
                     std::size_t ldb, float beta, float* c, std::size_t ldc) {
  const DType precision = h.precision;
  RT_CHECK(precision != DType::f32 && a.dtype == precision && b.dtype == precision,
           "16-bit GEMM ({} x {} x {}): operands of {} and {} on a {} context", m, n, k,
           dtype_name(a.dtype), dtype_name(b.dtype), dtype_name(precision));
  const cudaDataType_t type = precision == DType::f16 ? CUDA_R_16F : CUDA_R_16BF;
  RT_CUBLAS_CHECK(
      cublasGemmEx(static_cast<cublasHandle_t>(h.blas), trans_b ? CUBLAS_OP_T : CUBLAS_OP_N,
                   trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, static_cast<int>(n), static_cast<int>(m),
                   static_cast<int>(k), &alpha, b.ptr, type, static_cast<int>(ldb), a.ptr, type,
                   static_cast<int>(lda), &beta, c, CUDA_R_32F, static_cast<int>(ldc),
                   CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

}  // namespace ringtrain::detail
