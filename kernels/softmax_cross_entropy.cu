#include "core/cuda/check_cuda.h"
#include "kernels/launch_shape.cuh"
#include "kernels/softmax_cross_entropy.cuh"
#include "kernels/softmax_cross_entropy.h"

namespace ringtrain::kernels {

namespace {
// One thread per row: classification heads are narrow (tens of classes), so a
// row fits one thread's registers and loop.
__global__ void softmax_ce_forward_kernel(const float* __restrict__ logits,
                                          const int* __restrict__ labels, std::size_t rows,
                                          int classes, float* __restrict__ row_loss,
                                          int* __restrict__ row_correct, float smoothing) {
  const std::size_t r = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (r >= rows) return;
  softmax_ce_row_forward(logits + r * classes, classes, labels[r], &row_loss[r], &row_correct[r],
                         smoothing);
}

__global__ void softmax_ce_backward_kernel(const float* __restrict__ logits,
                                           const int* __restrict__ labels, std::size_t rows,
                                           int classes, float scale, float* __restrict__ dlogits,
                                           float smoothing) {
  const std::size_t r = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (r >= rows) return;
  softmax_ce_row_backward(logits + r * classes, classes, labels[r], scale, dlogits + r * classes,
                          smoothing);
}

constexpr unsigned kTotalsThreads = 256;

__global__ void loss_totals_add_kernel(const float* __restrict__ row_loss,
                                       const int* __restrict__ row_correct, std::size_t rows,
                                       double* __restrict__ totals) {
  __shared__ double partial[kLossTotalsCount][kTotalsThreads];
  double mine[kLossTotalsCount] = {0.0, 0.0, 0.0};
  for (std::size_t r = threadIdx.x; r < rows; r += blockDim.x)
    loss_totals_add_row(row_loss[r], row_correct[r], mine);
  for (int k = 0; k < kLossTotalsCount; ++k) partial[k][threadIdx.x] = mine[k];
  __syncthreads();
  for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s)
      for (int k = 0; k < kLossTotalsCount; ++k)
        partial[k][threadIdx.x] += partial[k][threadIdx.x + s];
    __syncthreads();
  }
  if (threadIdx.x == 0)
    for (int k = 0; k < kLossTotalsCount; ++k) totals[k] += partial[k][0];
}

unsigned row_blocks(std::size_t rows) {
  return static_cast<unsigned>((rows + kElementwiseThreads - 1) / kElementwiseThreads);
}
}  // namespace

void softmax_ce_forward_cuda(const float* logits, const std::int32_t* labels, std::size_t rows,
                             std::size_t classes, float* row_loss, std::int32_t* row_correct,
                             float smoothing, void* stream) {
  if (rows == 0) return;
  softmax_ce_forward_kernel<<<row_blocks(rows), kElementwiseThreads, 0,
                              static_cast<cudaStream_t>(stream)>>>(
      logits, labels, rows, static_cast<int>(classes), row_loss, row_correct, smoothing);
  RT_CUDA_CHECK_LAUNCH();
}

void softmax_ce_backward_cuda(const float* logits, const std::int32_t* labels, std::size_t rows,
                              std::size_t classes, float scale, float* dlogits, float smoothing,
                              void* stream) {
  if (rows == 0) return;
  softmax_ce_backward_kernel<<<row_blocks(rows), kElementwiseThreads, 0,
                               static_cast<cudaStream_t>(stream)>>>(
      logits, labels, rows, static_cast<int>(classes), scale, dlogits, smoothing);
  RT_CUDA_CHECK_LAUNCH();
}

void loss_totals_add_cuda(const float* row_loss, const std::int32_t* row_correct, std::size_t rows,
                          double* totals, void* stream) {
  if (rows == 0) return;
  loss_totals_add_kernel<<<1, kTotalsThreads, 0, static_cast<cudaStream_t>(stream)>>>(
      row_loss, row_correct, rows, totals);
  RT_CUDA_CHECK_LAUNCH();
}

}  // namespace ringtrain::kernels
