#include <math.h>

#include "core/cuda/check_cuda.h"
#include "kernels/launch_shape.cuh"
#include "kernels/softmax_cross_entropy.cuh"
#include "kernels/softmax_cross_entropy.h"
#include "kernels/warp_rows.cuh"

namespace ringtrain::kernels {

namespace {
// One thread per row: classification heads are narrow (tens of classes), so a
// row fits one thread's registers and loop.
// A row's second label under a mix (-1: none, with lam 1: the plain loss).
__device__ __forceinline__ int second_label(const int* __restrict__ second, std::size_t r) {
  return second != nullptr ? second[r] : -1;
}

template <typename T>
__global__ void softmax_ce_forward_kernel(const T* __restrict__ logits,
                                          const int* __restrict__ labels, std::size_t rows,
                                          int classes, std::size_t stride,
                                          float* __restrict__ row_loss,
                                          int* __restrict__ row_correct, float smoothing,
                                          const int* __restrict__ second, float lam) {
  const std::size_t r = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (r >= rows) return;
  softmax_ce_row_forward(logits + r * stride, classes, labels[r], &row_loss[r], &row_correct[r],
                         smoothing, second_label(second, r), lam);
}

// The gradient may be written over the logits (the model's in-place logits
// gradient): each thread reads its row's logits before it writes them, so
// logits and dlogits carry no __restrict__.
template <typename T, typename G>
__global__ void softmax_ce_backward_kernel(const T* logits, const int* __restrict__ labels,
                                           std::size_t rows, int classes, std::size_t stride,
                                           float scale, G* dlogits, float smoothing,
                                           const int* __restrict__ second, float lam) {
  const std::size_t r = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (r >= rows) return;
  softmax_ce_row_backward(logits + r * stride, classes, labels[r], scale, dlogits + r * stride,
                          smoothing, second_label(second, r), lam);
  softmax_ce_row_zero_padding(dlogits + r * stride, classes, static_cast<int>(stride));
}

// One warp per row for wide rows (a language model's vocabulary: 50257 for
// GPT-2), where a thread per row would walk 150k elements alone with strided
// reads. The same arithmetic as softmax_ce_row_forward/backward, its sums
// lane-strided then combined by shuffles (a fixed order: bit-for-bit repeats).
constexpr int kWideClasses = 512;
// Maximum and its first index over the warp (ties: the lower index, as the
// serial loop's strict >).
__device__ __forceinline__ void warp_argmax(float& m, int& arg) {
  for (unsigned o = kWarp / 2; o > 0; o /= 2) {
    const float om = __shfl_xor_sync(0xffffffffu, m, o);
    const int oa = __shfl_xor_sync(0xffffffffu, arg, o);
    if (om > m || (om == m && oa < arg)) {
      m = om;
      arg = oa;
    }
  }
}

// A wide row's second label: the first again where nothing is mixed.
__device__ __forceinline__ int wide_second_label(const int* __restrict__ second_labels,
                                                 std::size_t r, int label, float lam) {
  const int second = second_label(second_labels, r);
  return second < 0 && lam == 1.0f ? label : second;
}

// A wide row's maximum (ties: its first index), the exp-sum around it and the
// plain sum of its logits, every lane holding the warp's totals.
struct WideRowStats {
  float m;
  int arg;
  float s, sum_z;
};
template <typename T>
__device__ __forceinline__ WideRowStats wide_row_stats(const T* z, int classes, int lane) {
  WideRowStats st{-INFINITY, classes, 0.0f, 0.0f};
  for (int j = lane; j < classes; j += kWarp)
    if (load(z, j) > st.m) {
      st.m = load(z, j);
      st.arg = j;
    }
  warp_argmax(st.m, st.arg);
  for (int j = lane; j < classes; j += kWarp) {
    st.s += expf(load(z, j) - st.m);
    st.sum_z += load(z, j);
  }
  st.s = warp_sum(st.s);
  st.sum_z = warp_sum(st.sum_z);
  return st;
}

// A wide row's gradient, softmax times inv (the loss scale over the exp-sum)
// less the target, from the row's maximum m; the padding up to width +0.
template <typename T, typename G>
__device__ __forceinline__ void wide_row_gradient(const T* z, G* dz, int classes, int width,
                                                  int lane, float m, float inv,
                                                  const SoftmaxCeTarget& t, int label, int second) {
  for (int j = lane; j < classes; j += kWarp)
    store(dz, j, expf(load(z, j) - m) * inv - softmax_ce_target_at(t, j, label, second));
  for (int j = classes + lane; j < width; j += kWarp) store(dz, j, 0.0f);
}

template <typename T>
__global__ void softmax_ce_forward_wide_kernel(const T* __restrict__ logits,
                                               const int* __restrict__ labels, std::size_t rows,
                                               int classes, std::size_t stride,
                                               float* __restrict__ row_loss,
                                               int* __restrict__ row_correct, float smoothing,
                                               const int* __restrict__ second_labels, float lam) {
  const std::size_t r = warp_row();
  const int lane = static_cast<int>(warp_lane());
  if (r >= rows) return;
  const int label = labels[r];
  const int second = wide_second_label(second_labels, r, label, lam);
  if (label == kIgnoredLabel || !softmax_ce_labels_valid(label, second, classes)) {
    if (lane == 0)  // the row function's verdicts for these
      softmax_ce_row_forward(logits + r * stride, classes, label, &row_loss[r], &row_correct[r],
                             smoothing, second, lam);
    return;
  }
  const T* z = logits + r * stride;
  const WideRowStats st = wide_row_stats(z, classes, lane);
  if (lane != 0) return;
  const float lse = logf(st.s) + st.m;
  row_loss[r] = softmax_ce_row_loss(z, lse, st.sum_z, classes, label, second, lam, smoothing);
  row_correct[r] = st.arg == softmax_ce_accuracy_label(label, second, lam) ? 1 : 0;
}

template <typename T, typename G>
__global__ void softmax_ce_backward_wide_kernel(const T* logits, const int* __restrict__ labels,
                                                std::size_t rows, int classes, std::size_t stride,
                                                float scale, G* dlogits, float smoothing,
                                                const int* __restrict__ second_labels, float lam) {
  const std::size_t r = warp_row();
  const int lane = static_cast<int>(warp_lane());
  if (r >= rows) return;
  const int label = labels[r];
  const int second = wide_second_label(second_labels, r, label, lam);
  const T* z = logits + r * stride;
  G* dz = dlogits + r * stride;
  const int width = static_cast<int>(stride);
  if (label == kIgnoredLabel) {
    for (int j = lane; j < width; j += kWarp) store(dz, j, 0.0f);
    return;
  }
  float m = -INFINITY;
  for (int j = lane; j < classes; j += kWarp) m = fmaxf(m, load(z, j));
  m = warp_max(m);
  float s = 0.0f;
  for (int j = lane; j < classes; j += kWarp) s += expf(load(z, j) - m);
  s = warp_sum(s);
  wide_row_gradient(z, dz, classes, width, lane, m, scale / s,
                    softmax_ce_target(label, second, lam, scale, smoothing, classes), label,
                    second);
}

// The fused classifier, one thread per row (softmax_ce_row_forward_backward).
// dlogits may be the logits, as for the backward kernel.
template <typename T, typename G>
__global__ void softmax_ce_forward_backward_kernel(const T* logits, const int* __restrict__ labels,
                                                   std::size_t rows, int classes,
                                                   std::size_t stride, float scale, G* dlogits,
                                                   float* __restrict__ row_loss,
                                                   int* __restrict__ row_correct, float smoothing,
                                                   const int* __restrict__ second, float lam) {
  const std::size_t r = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (r >= rows) return;
  softmax_ce_row_forward_backward(logits + r * stride, classes, labels[r], scale,
                                  dlogits + r * stride, &row_loss[r], &row_correct[r], smoothing,
                                  second_label(second, r), lam);
  softmax_ce_row_zero_padding(dlogits + r * stride, classes, static_cast<int>(stride));
}

// The fused classifier, one warp per wide row: the forward wide kernel's
// maximum, sums and loss, then the backward wide kernel's gradient from the
// same maximum and exp-sum (the backward's fmaxf maximum is the same value,
// up to the sign of a zero maximum, which exp(z - m) does not see). Lane 0
// reads the label's logits for the loss before the warp overwrites them.
template <typename T, typename G>
__global__ void softmax_ce_forward_backward_wide_kernel(
    const T* logits, const int* __restrict__ labels, std::size_t rows, int classes,
    std::size_t stride, float scale, G* dlogits, float* __restrict__ row_loss,
    int* __restrict__ row_correct, float smoothing, const int* __restrict__ second_labels,
    float lam) {
  const std::size_t r = warp_row();
  const int lane = static_cast<int>(warp_lane());
  if (r >= rows) return;
  const int label = labels[r];
  const int second = wide_second_label(second_labels, r, label, lam);
  const T* z = logits + r * stride;
  G* dz = dlogits + r * stride;
  const int width = static_cast<int>(stride);
  if (label == kIgnoredLabel) {
    if (lane == 0) {
      row_loss[r] = 0.0f;
      row_correct[r] = kIgnoredRow;
    }
    for (int j = lane; j < width; j += kWarp) store(dz, j, 0.0f);
    return;
  }
  const WideRowStats st = wide_row_stats(z, classes, lane);
  if (lane == 0) {
    if (softmax_ce_labels_valid(label, second, classes)) {
      const float lse = logf(st.s) + st.m;
      row_loss[r] = softmax_ce_row_loss(z, lse, st.sum_z, classes, label, second, lam, smoothing);
      row_correct[r] = st.arg == softmax_ce_accuracy_label(label, second, lam) ? 1 : 0;
    } else {
      row_loss[r] = nanf("");
      row_correct[r] = -1;
    }
  }
  __syncwarp();
  wide_row_gradient(z, dz, classes, width, lane, st.m, scale / st.s,
                    softmax_ce_target(label, second, lam, scale, smoothing, classes), label,
                    second);
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

void softmax_ce_forward_cuda(const void* logits, DType logits_type, const std::int32_t* labels,
                             std::size_t rows, std::size_t classes, std::size_t stride,
                             float* row_loss, std::int32_t* row_correct, float smoothing,
                             const std::int32_t* second, float lam, void* stream) {
  if (rows == 0) return;
  const auto s = static_cast<cudaStream_t>(stream);
  with_storage(logits_type, [&](auto t) {
    using T = decltype(t);
    const T* z = static_cast<const T*>(logits);
    if (classes >= kWideClasses)
      softmax_ce_forward_wide_kernel<<<warp_row_blocks(rows), kRowThreads, 0, s>>>(
          z, labels, rows, static_cast<int>(classes), stride, row_loss, row_correct, smoothing,
          second, lam);
    else
      softmax_ce_forward_kernel<<<row_blocks(rows), kElementwiseThreads, 0, s>>>(
          z, labels, rows, static_cast<int>(classes), stride, row_loss, row_correct, smoothing,
          second, lam);
  });
  RT_CUDA_CHECK_LAUNCH();
}

void softmax_ce_backward_cuda(const void* logits, DType logits_type, const std::int32_t* labels,
                              std::size_t rows, std::size_t classes, std::size_t stride,
                              float scale, void* dlogits, DType dlogits_type, float smoothing,
                              const std::int32_t* second, float lam, void* stream) {
  if (rows == 0) return;
  const auto s = static_cast<cudaStream_t>(stream);
  with_storage_pair(logits_type, dlogits_type, [&](auto t, auto g) {
    using T = decltype(t);
    using G = decltype(g);
    const T* z = static_cast<const T*>(logits);
    G* dz = static_cast<G*>(dlogits);
    if (classes >= kWideClasses)
      softmax_ce_backward_wide_kernel<<<warp_row_blocks(rows), kRowThreads, 0, s>>>(
          z, labels, rows, static_cast<int>(classes), stride, scale, dz, smoothing, second, lam);
    else
      softmax_ce_backward_kernel<<<row_blocks(rows), kElementwiseThreads, 0, s>>>(
          z, labels, rows, static_cast<int>(classes), stride, scale, dz, smoothing, second, lam);
  });
  RT_CUDA_CHECK_LAUNCH();
}

void softmax_ce_forward_backward_cuda(const void* logits, DType logits_type,
                                      const std::int32_t* labels, std::size_t rows,
                                      std::size_t classes, std::size_t stride, float scale,
                                      void* dlogits, DType dlogits_type, float* row_loss,
                                      std::int32_t* row_correct, float smoothing,
                                      const std::int32_t* second, float lam, void* stream) {
  if (rows == 0) return;
  const auto s = static_cast<cudaStream_t>(stream);
  with_storage_pair(logits_type, dlogits_type, [&](auto t, auto g) {
    using T = decltype(t);
    using G = decltype(g);
    const T* z = static_cast<const T*>(logits);
    G* dz = static_cast<G*>(dlogits);
    if (classes >= kWideClasses)
      softmax_ce_forward_backward_wide_kernel<<<warp_row_blocks(rows), kRowThreads, 0, s>>>(
          z, labels, rows, static_cast<int>(classes), stride, scale, dz, row_loss, row_correct,
          smoothing, second, lam);
    else
      softmax_ce_forward_backward_kernel<<<row_blocks(rows), kElementwiseThreads, 0, s>>>(
          z, labels, rows, static_cast<int>(classes), stride, scale, dz, row_loss, row_correct,
          smoothing, second, lam);
  });
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
