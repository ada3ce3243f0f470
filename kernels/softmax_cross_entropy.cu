// The softmax cross-entropy kernels (kernels/softmax_cross_entropy.h): one
// thread per narrow row, on kernels/softmax_cross_entropy.cuh's row functions
// (the CPU path's); one block per wide row (a vocabulary), the row's groups of
// 8 kept in registers between its passes, on the same .cuh arithmetic.
#include <math.h>

#include "core/cuda/check_cuda.h"
#include "kernels/launch_shape.cuh"
#include "kernels/softmax_cross_entropy.cuh"
#include "kernels/softmax_cross_entropy.h"
#include "kernels/vector8.cuh"
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

// Wide rows (a language model's vocabulary: GPT-2's 50,257 classes) take one
// block of kWideThreads per row. Thread t owns the row's groups of 8 elements
// g = t, t + kWideThreads, ..., elements 8g ... 8g + 7 (those at or past
// `classes` are not in the row; those in [classes, stride) are the padding,
// whose gradient is +0). Where the row is 16-byte aligned and stride is a
// multiple of 8 (the padded 16-bit head), a group is one 16-byte access (two
// for fp32), else 8 element accesses: the same groups, the same operations in
// the same order, so the same bits either way. A thread keeps its first
// kWideKept groups in registers, so the three passes (maximum, exp-sum,
// gradient) read the row from memory once and write it once.
constexpr int kWideClasses = 512;
// 1024 threads: GPT-2's 6,288 groups of a 16-bit row are 7 a thread, 28
// registers of raw words, within the 64 a thread that 1024 allow.
constexpr unsigned kWideThreads = 1024;
constexpr unsigned kWideWarps = kWideThreads / kWarp;
static_assert(kWideWarps == kWarp, "the block's combine is one warp over the warps' results");
// Groups a thread keeps: 7 16-bit ones (4 registers each), 3 fp32 ones (8
// each); the rest are read again in each later pass.
template <typename T>
constexpr int kWideKept = sizeof(T) == 2 ? 7 : 3;

// A group of 8 values of T as raw 16-byte words.
template <typename T>
struct WideGroup {
  uint4 raw[sizeof(T) / 2];
};
constexpr int kV = static_cast<int>(kVector8);
// Elements from one of a thread's groups to its next: the block's groups.
constexpr int kWideSpan = static_cast<int>(kWideThreads) * kV;

// The group at p, `left` elements of the row from p on: one or two 16-byte
// loads (vec, a whole group), or its elements below `left` one by one (the
// others +0 bits, which no pass reads). A row's last, partial group is read
// element-wise even where vec: the last row's logits may end at its classes
// (check_logits), and a 16-byte load would read past them.
template <typename T>
__device__ __forceinline__ void wide_load(const T* p, int left, bool vec, WideGroup<T>& out) {
  if (vec && left >= kV) {
    const auto* from = reinterpret_cast<const uint4*>(p);
#pragma unroll
    for (std::size_t q = 0; q < sizeof(T) / 2; ++q) out.raw[q] = from[q];
    return;
  }
  T w[kVector8];
#pragma unroll
  for (int k = 0; k < kV; ++k) w[k] = k < left ? p[k] : T{};
  memcpy(out.raw, w, sizeof w);
}

template <typename T>
__device__ __forceinline__ void wide_unpack(const WideGroup<T>& in, float (&v)[kVector8]) {
  T w[kVector8];
  memcpy(w, in.raw, sizeof w);
#pragma unroll
  for (unsigned k = 0; k < kVector8; ++k) v[k] = load(w, k);
}

// The group at p, `left` elements of the width from p on: store8 (vec), or
// its elements below `left` one by one.
template <typename G>
__device__ __forceinline__ void wide_store(G* p, int left, bool vec, const float (&v)[kVector8]) {
  if (vec) {
    store8(p, 0, v);
    return;
  }
#pragma unroll
  for (int k = 0; k < kV; ++k)
    if (k < left) store(p, k, v[k]);
}

// A wide row's maximum (ties: its first index, as the serial loop's strict
// >), the exp-sum around it and the plain sum of its logits.
struct WideRowStats {
  float m;
  int arg;
  float s, sum_z;
};
// The warps' partial results, for the block's combine.
struct WideShared {
  float m[kWideWarps];
  int arg[kWideWarps];
  float s[kWideWarps], sum_z[kWideWarps];
  // Thread 0's, for its verdicts: the label's logits (wide_label_logits),
  // the row's argmax and sum of logits (wide_keep_verdict_stats).
  float z_label, z_second;
  int row_arg;
  float row_sum_z;
};

// Maximum and its first index over the warp (ties: the lower index).
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

// The elements of the group at `first` below `left` into the thread's
// running maximum, in ascending order. A whole group (every group of a row
// but its last) skips the bounds test: the same operations.
__device__ __forceinline__ void wide_max8(const float (&v)[kVector8], int first, int left,
                                          WideRowStats& st) {
  if (left >= kV) {
#pragma unroll
    for (int k = 0; k < kV; ++k)
      if (v[k] > st.m) {
        st.m = v[k];
        st.arg = first + k;
      }
    return;
  }
#pragma unroll
  for (int k = 0; k < kV; ++k)
    if (k < left && v[k] > st.m) {
      st.m = v[k];
      st.arg = first + k;
    }
}
// kWholeFast false: the element-wise form for whole groups too (the same
// operations), where eight interleaved exps would cost the kept groups a
// spill (the groups read again past the kept ones).
template <bool kWholeFast = true>
__device__ __forceinline__ void wide_sums8(const float (&v)[kVector8], int left, WideRowStats& st) {
  if (kWholeFast && left >= kV) {
#pragma unroll
    for (int k = 0; k < kV; ++k) {
      st.s += expf(v[k] - st.m);
      st.sum_z += v[k];
    }
    return;
  }
#pragma unroll
  for (int k = 0; k < kV; ++k)
    if (k < left) {
      st.s += expf(v[k] - st.m);
      st.sum_z += v[k];
    }
}

// The thread's lane, read from its special register at each use: a value
// held across the passes would cost the kept groups a register.
__device__ __forceinline__ unsigned fresh_lane() {
  unsigned lane;
  asm volatile("mov.u32 %0, %%laneid;" : "=r"(lane));
  return lane;
}

// The row statistics every wide kernel takes, each thread's groups in
// ascending order, then a fixed combine (the warp's butterfly, then every
// warp the same butterfly over the warps' results, through shared memory): a
// function of `classes` alone, bit for bit. Leaves the thread's first K
// groups in `kept`. Its last block barrier follows every read of the row
// here, so the caller may then write the row in place.
template <typename T, int K>
__device__ __forceinline__ WideRowStats wide_row_stats(const T* z, int classes, bool vec,
                                                       WideGroup<T> (&kept)[K], WideShared& sh) {
  const int first = static_cast<int>(threadIdx.x) * kV;  // the thread's first element
  const int left = classes - first;                      // the row's elements from there
  const T* zt = z + first;
  // Every kept load issued before the first is used. The loops over groups
  // past the kept ones (rows of more than K * kWideSpan elements) stay rolled:
  // their registers are the kept groups'.
#pragma unroll
  for (int i = 0; i < K; ++i)
    if (i * kWideSpan < left) wide_load(zt + i * kWideSpan, left - i * kWideSpan, vec, kept[i]);
  WideRowStats st{-INFINITY, classes, 0.0f, 0.0f};
  float v[kVector8];
#pragma unroll
  for (int i = 0; i < K; ++i)
    if (i * kWideSpan < left) {
      wide_unpack(kept[i], v);
      wide_max8(v, first + i * kWideSpan, left - i * kWideSpan, st);
    }
#pragma unroll 1
  for (int e = K * kWideSpan; e < left; e += kWideSpan) {
    WideGroup<T> w;
    wide_load(zt + e, left - e, vec, w);
    wide_unpack(w, v);
    wide_max8(v, first + e, left - e, st);
  }
  warp_argmax(st.m, st.arg);
  if (fresh_lane() == 0) {
    sh.m[threadIdx.x / kWarp] = st.m;
    sh.arg[threadIdx.x / kWarp] = st.arg;
  }
  __syncthreads();
  st.m = sh.m[fresh_lane()];
  st.arg = sh.arg[fresh_lane()];
  warp_argmax(st.m, st.arg);

#pragma unroll
  for (int i = 0; i < K; ++i)
    if (i * kWideSpan < left) {
      wide_unpack(kept[i], v);
      wide_sums8(v, left - i * kWideSpan, st);
    }
#pragma unroll 1
  for (int e = K * kWideSpan; e < left; e += kWideSpan) {
    WideGroup<T> w;
    wide_load(zt + e, left - e, vec, w);
    wide_unpack(w, v);
    wide_sums8<false>(v, left - e, st);
  }
  st.s = warp_sum(st.s);
  st.sum_z = warp_sum(st.sum_z);
  if (fresh_lane() == 0) {
    sh.s[threadIdx.x / kWarp] = st.s;
    sh.sum_z[threadIdx.x / kWarp] = st.sum_z;
  }
  __syncthreads();
  st.s = warp_sum(sh.s[fresh_lane()]);
  st.sum_z = warp_sum(sh.sum_z[fresh_lane()]);
  return st;
}

// The gradient of the group at `first`: softmax times inv (the loss scale
// over the exp-sum) less the target for its `left` elements of the row, +0
// past them (the padding). A whole group without either label takes the
// target's off value for each element without asking, which is what
// softmax_ce_target_at gives them.
__device__ __forceinline__ void wide_gradient8(float (&v)[kVector8], int first, int left, float m,
                                               float inv, const SoftmaxCeTarget& t, int label,
                                               int second) {
  const auto in_group = [first](int j) {
    return static_cast<unsigned>(j) - static_cast<unsigned>(first) < kVector8;
  };
  if (left >= kV && !in_group(label) && !in_group(second)) {
#pragma unroll
    for (int k = 0; k < kV; ++k) v[k] = expf(v[k] - m) * inv - t.off;
    return;
  }
#pragma unroll
  for (int k = 0; k < kV; ++k)
    v[k] =
        k < left ? expf(v[k] - m) * inv - softmax_ce_target_at(t, first + k, label, second) : 0.0f;
}

// A wide row's gradient over its width (stride), each thread its own groups
// (kept ones from registers, the rest read again just before they are
// written over).
template <typename T, typename G, int K>
__device__ __forceinline__ void wide_row_gradient(const T* z, G* dz, int classes, int width,
                                                  bool vec, const WideGroup<T> (&kept)[K], float m,
                                                  float inv, const SoftmaxCeTarget& tg, int label,
                                                  int second) {
  const int first = static_cast<int>(threadIdx.x) * kV;
  const int left = classes - first, left_width = width - first;
  const T* zt = z + first;
  G* dzt = dz + first;
#pragma unroll
  for (int i = 0; i < K; ++i)
    if (i * kWideSpan < left_width) {
      float v[kVector8] = {};
      if (i * kWideSpan < left) wide_unpack(kept[i], v);
      wide_gradient8(v, first + i * kWideSpan, left - i * kWideSpan, m, inv, tg, label, second);
      wide_store(dzt + i * kWideSpan, left_width - i * kWideSpan, vec, v);
    }
#pragma unroll 1
  for (int e = K * kWideSpan; e < left_width; e += kWideSpan) {
    float v[kVector8] = {};
    if (e < left) {
      WideGroup<T> w;
      wide_load(zt + e, left - e, vec, w);
      wide_unpack(w, v);
    }
    wide_gradient8(v, first + e, left - e, m, inv, tg, label, second);
    wide_store(dzt + e, left_width - e, vec, v);
  }
}

// An ignored row's gradient: +0 over its width.
template <typename G>
__device__ __forceinline__ void wide_row_zero(G* dz, int width, bool vec) {
  const float zero[kVector8] = {};
  for (int first = static_cast<int>(threadIdx.x) * kV; first < width; first += kWideSpan)
    wide_store(dz + first, width - first, vec, zero);
}

// A wide row's second label: the first again where nothing is mixed.
__device__ __forceinline__ int wide_second_label(const int* __restrict__ second_labels,
                                                 std::size_t r, int label, float lam) {
  const int second = second_label(second_labels, r);
  return second < 0 && lam == 1.0f ? label : second;
}

// Thread 0 keeps the logits of a valid row's label and second label, read at
// the kernel's start (before the statistics' barriers, which precede any
// write), in shared memory: no registers held across the passes.
template <typename T>
__device__ __forceinline__ void wide_label_logits(const T* z, int label, int second, int classes,
                                                  WideShared& sh) {
  if (threadIdx.x != 0 || !softmax_ce_labels_valid(label, second, classes)) return;
  sh.z_label = load(z, label);
  sh.z_second = load(z, second);
}

// Thread 0 keeps what its verdicts need beyond the gradient's maximum and
// exp-sum in shared memory too, so that the fused kernel can give them after
// the gradient, when the kept groups' registers are free.
__device__ __forceinline__ void wide_keep_verdict_stats(const WideRowStats& st, WideShared& sh) {
  if (threadIdx.x != 0) return;
  sh.row_arg = st.arg;
  sh.row_sum_z = st.sum_z;
}

// Thread 0's verdicts on a valid row with maximum m and exp-sum s: the row
// loss and whether the argmax is the (weightier) label.
__device__ __forceinline__ void wide_row_verdict(float m, float s, const WideShared& sh,
                                                 int classes, int label, int second, float lam,
                                                 float smoothing, float* loss, int* correct) {
  const float lse = logf(s) + m;
  *loss = softmax_ce_loss(sh.z_label, sh.z_second, lse, sh.row_sum_z, classes, label, second, lam,
                          smoothing);
  *correct = sh.row_arg == softmax_ce_accuracy_label(label, second, lam) ? 1 : 0;
}

template <typename T>
__global__ void __launch_bounds__(kWideThreads, 1)
    softmax_ce_forward_wide_kernel(const T* __restrict__ logits, const int* __restrict__ labels,
                                   int classes, std::size_t stride, bool vec,
                                   float* __restrict__ row_loss, int* __restrict__ row_correct,
                                   float smoothing, const int* __restrict__ second_labels,
                                   float lam) {
  __shared__ WideShared sh;
  const std::size_t r = blockIdx.x;
  const int label = labels[r];
  const int second = wide_second_label(second_labels, r, label, lam);
  const T* z = logits + r * stride;
  if (label == kIgnoredLabel || !softmax_ce_labels_valid(label, second, classes)) {
    if (threadIdx.x == 0)  // the row function's verdicts for these
      softmax_ce_row_forward(z, classes, label, &row_loss[r], &row_correct[r], smoothing, second,
                             lam);
    return;
  }
  wide_label_logits(z, label, second, classes, sh);
  WideGroup<T> kept[kWideKept<T>];
  const WideRowStats st = wide_row_stats(z, classes, vec, kept, sh);
  wide_keep_verdict_stats(st, sh);
  if (threadIdx.x == 0)
    wide_row_verdict(st.m, st.s, sh, classes, label, second, lam, smoothing, &row_loss[r],
                     &row_correct[r]);
}

// The gradient may be written over the logits: each thread reads its groups
// before it writes them, and no thread writes before the statistics'
// barriers, so logits and dlogits carry no __restrict__.
template <typename T, typename G>
__global__ void __launch_bounds__(kWideThreads, 1)
    softmax_ce_backward_wide_kernel(const T* logits, const int* __restrict__ labels, int classes,
                                    std::size_t stride, bool vec, float scale, G* dlogits,
                                    float smoothing, const int* __restrict__ second_labels,
                                    float lam) {
  __shared__ WideShared sh;
  const std::size_t r = blockIdx.x;
  const int label = labels[r];
  const int second = wide_second_label(second_labels, r, label, lam);
  const T* z = logits + r * stride;
  G* dz = dlogits + r * stride;
  const int width = static_cast<int>(stride);
  if (label == kIgnoredLabel) {
    wide_row_zero(dz, width, vec);
    return;
  }
  WideGroup<T> kept[kWideKept<T>];
  const WideRowStats st = wide_row_stats(z, classes, vec, kept, sh);
  wide_row_gradient(z, dz, classes, width, vec, kept, st.m, scale / st.s,
                    softmax_ce_target(label, second, lam, scale, smoothing, classes), label,
                    second);
}

// The fused classifier on wide rows: the backward wide kernel's gradient
// and the forward wide kernel's verdicts from the same statistics (one
// function: the bits of the two kernels). Thread 0 has read the label's
// logits before the statistics' barriers, so the gradient may be written
// over them.
template <typename T, typename G>
__global__ void __launch_bounds__(kWideThreads, 1)
    softmax_ce_forward_backward_wide_kernel(const T* logits, const int* __restrict__ labels,
                                            int classes, std::size_t stride, bool vec, float scale,
                                            G* dlogits, float* __restrict__ row_loss,
                                            int* __restrict__ row_correct, float smoothing,
                                            const int* __restrict__ second_labels, float lam) {
  __shared__ WideShared sh;
  const std::size_t r = blockIdx.x;
  const int label = labels[r];
  const int second = wide_second_label(second_labels, r, label, lam);
  const T* z = logits + r * stride;
  G* dz = dlogits + r * stride;
  const int width = static_cast<int>(stride);
  if (label == kIgnoredLabel) {
    if (threadIdx.x == 0) {
      row_loss[r] = 0.0f;
      row_correct[r] = kIgnoredRow;
    }
    wide_row_zero(dz, width, vec);
    return;
  }
  wide_label_logits(z, label, second, classes, sh);
  WideGroup<T> kept[kWideKept<T>];
  const WideRowStats st = wide_row_stats(z, classes, vec, kept, sh);
  wide_keep_verdict_stats(st, sh);
  wide_row_gradient(z, dz, classes, width, vec, kept, st.m, scale / st.s,
                    softmax_ce_target(label, second, lam, scale, smoothing, classes), label,
                    second);
  // After the gradient: the label's logits are in shared memory, and the
  // registers the kept groups held are free.
  if (threadIdx.x != 0) return;
  if (softmax_ce_labels_valid(label, second, classes)) {
    wide_row_verdict(st.m, st.s, sh, classes, label, second, lam, smoothing, &row_loss[r],
                     &row_correct[r]);
  } else {
    row_loss[r] = nanf("");
    row_correct[r] = -1;
  }
}

// Whether a launch's rows take the 16-byte accesses: every row start of each
// buffer 16-byte aligned.
bool wide_vector(const void* a, const void* b, std::size_t stride) {
  return stride % kVector8 == 0 && vector8_aligned(static_cast<const char*>(a)) &&
         vector8_aligned(static_cast<const char*>(b));
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
      softmax_ce_forward_wide_kernel<<<static_cast<unsigned>(rows), kWideThreads, 0, s>>>(
          z, labels, static_cast<int>(classes), stride, wide_vector(z, z, stride), row_loss,
          row_correct, smoothing, second, lam);
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
      softmax_ce_backward_wide_kernel<<<static_cast<unsigned>(rows), kWideThreads, 0, s>>>(
          z, labels, static_cast<int>(classes), stride, wide_vector(z, dz, stride), scale, dz,
          smoothing, second, lam);
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
      softmax_ce_forward_backward_wide_kernel<<<static_cast<unsigned>(rows), kWideThreads, 0, s>>>(
          z, labels, static_cast<int>(classes), stride, wide_vector(z, dz, stride), scale, dz,
          row_loss, row_correct, smoothing, second, lam);
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
