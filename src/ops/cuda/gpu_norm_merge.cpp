// The GPU halves of BatchNorm, global average pooling and the merge ops (add,
// concat): forwards to kernels/*.h, and strided copies through the runtime.
#include <cuda_runtime.h>

#include "core/cuda/check_cuda.h"
#include "kernels/axpy.h"
#include "kernels/batch_norm.h"
#include "kernels/pitched_copy.h"
#include "kernels/precision.h"
#include "kernels/scale.h"
#include "ops/gpu_ops.h"

namespace ringtrain::detail {

void gpu_batch_norm_welford(const GpuHandles& h, BufferView x, std::size_t n, std::size_t c,
                            std::size_t hw, float* mean, float* m2, float* count_keep,
                            float* sums) {
  kernels::batch_norm_welford_cuda(x.ptr, x.dtype, n, c, hw, mean, m2, count_keep, sums, h.scratch,
                                   kGpuScratchFloats, h.stream);
}
void gpu_batch_norm_welford_ranks(void* stream, float* sums, std::size_t c, float local_count,
                                  float* mean, const float* m2, float* count_keep) {
  kernels::batch_norm_welford_ranks_cuda(sums, c, local_count, mean, m2, count_keep, stream);
}
void gpu_batch_norm_finalize(void* stream, const float* m2, const float* count, std::size_t c,
                             float eps, float momentum, bool update_running, const float* mean,
                             float* invstd, float* running_mean, float* running_var) {
  kernels::batch_norm_finalize_cuda(m2, count, c, eps, momentum, update_running, mean, invstd,
                                    running_mean, running_var, stream);
}
void gpu_batch_norm_eval_stats(void* stream, const float* running_mean, const float* running_var,
                               std::size_t c, float eps, float* mean, float* invstd) {
  kernels::batch_norm_eval_stats_cuda(running_mean, running_var, c, eps, mean, invstd, stream);
}
void gpu_batch_norm_apply(void* stream, BufferView x, BufferView y, std::size_t n, std::size_t c,
                          std::size_t hw, const float* mean, const float* invstd,
                          const float* gamma, const float* beta, DType precision) {
  kernels::batch_norm_apply_cuda(x.ptr, y.ptr, y.dtype, n, c, hw, mean, invstd, gamma, beta,
                                 precision, stream);
}
void gpu_batch_norm_backward_reduce(const GpuHandles& h, BufferView x, BufferView dy, std::size_t n,
                                    std::size_t c, std::size_t hw, const float* mean,
                                    const float* invstd, float* sums, float* dgamma, float* dbeta,
                                    bool accumulate) {
  kernels::batch_norm_backward_reduce_cuda(x.ptr, dy.ptr, dy.dtype, n, c, hw, mean, invstd, sums,
                                           dgamma, dbeta, accumulate, h.scratch, kGpuScratchFloats,
                                           h.stream);
}
void gpu_batch_norm_backward_dx(void* stream, BufferView x, BufferView dy, BufferView dx,
                                std::size_t n, std::size_t c, std::size_t hw, const float* mean,
                                const float* invstd, const float* gamma, const float* sums,
                                const float* count, DType precision) {
  kernels::batch_norm_backward_dx_cuda(x.ptr, dy.ptr, dy.dtype, dx.ptr, dx.dtype, n, c, hw, mean,
                                       invstd, gamma, sums, count, precision, stream);
}
void gpu_axpy(void* stream, float a, const float* x, float* y, std::size_t n) {
  kernels::axpy_f32_cuda(a, x, y, n, stream);
}
void gpu_axpy_rounded(void* stream, float a, const float* x, const float* y, float* out,
                      std::size_t n, DType precision) {
  kernels::axpy_rounded_f32_cuda(a, x, y, out, n, precision, stream);
}
void gpu_scale(void* stream, float* x, std::size_t n, float f) {
  kernels::scale_f32_cuda(x, n, f, stream);
}
void gpu_round_to_precision(void* stream, float* y, const float* x, std::size_t n,
                            DType precision) {
  kernels::round_to_precision_cuda(y, x, n, precision, stream);
}
void gpu_copy_blocks(void* stream, void* dst, std::size_t dpitch, const void* src,
                     std::size_t spitch, std::size_t width, std::size_t rows, bool device_buffers) {
  if (rows == 0 || width == 0) return;
  // cudaMemcpyDefault: a caller's host array (labels given by a test or a
  // tool) is copied too, as copy_view would. A contiguous copy goes as one
  // block: cudaMemcpy2D refuses a pitch over 2 GiB, which a whole large
  // activation (one row) would pass.
  const auto s = static_cast<cudaStream_t>(stream);
  if (rows == 1 || (width == dpitch && width == spitch)) {
    RT_CUDA_CHECK(cudaMemcpyAsync(dst, src, width * rows, cudaMemcpyDefault, s));
    return;
  }
  // Between device buffers, narrow rows (a channels-last concat's slices)
  // by a kernel's aligned units: cudaMemcpy2D moved 128- to 768-byte rows at
  // 0.4 to 0.6 TB/s (inception3's concats, round 7).
  if (device_buffers && kernels::copy_pitched_cuda(dst, dpitch, src, spitch, width, rows, stream))
    return;
  RT_CUDA_CHECK(cudaMemcpy2DAsync(dst, dpitch, src, spitch, width, rows, cudaMemcpyDefault, s));
}

}  // namespace ringtrain::detail
