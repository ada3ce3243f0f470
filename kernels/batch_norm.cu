#include <cstdint>

#include "core/cuda/check_cuda.h"
#include "kernels/batch_norm.cuh"
#include "kernels/batch_norm.h"
#include "kernels/batch_norm_welford.cuh"
#include "kernels/channel_reduce.cuh"
#include "kernels/fast_divide.cuh"
#include "kernels/launch_shape.cuh"
#include "kernels/precision.cuh"
#include "kernels/storage.cuh"
#include "kernels/vector8.cuh"

namespace ringtrain::kernels {

namespace {

// Backward's reduction (kernels/channel_reduce.cuh): the sums of dy and of
// dy * xhat. x and dy are of the storage type T (kernels/storage.cuh), summed
// in fp32.
template <typename T>
struct BackwardValue {  // sum of dy, and of dy * xhat
  const T* x;
  const T* dy;
  const float* mean;
  const float* invstd;
  __device__ Sums<2> operator()(std::size_t a, std::size_t c) const {
    const float g = load(dy, a);
    return {{g, bn_dy_xhat(g, load(x, a), mean[c], invstd[c])}};
  }
  bool rows8_aligned() const { return vector8_aligned(x) && vector8_aligned(dy); }
  __device__ void values8(std::size_t a, std::size_t c0, Sums<2> (&out)[kVector8]) const {
    float gs[kVector8], xs[kVector8];
    load8(dy, a, gs);
    load8(x, a, xs);
#pragma unroll
    for (unsigned k = 0; k < kVector8; ++k)
      out[k] = {{gs[k], bn_dy_xhat(gs[k], xs[k], mean[c0 + k], invstd[c0 + k])}};
  }
  // 16-bit rows: four rows' bytes in flight (channel_rows8_kernel).
  static constexpr int kRowsInFlight = sizeof(T) == 2 ? 4 : 2;
  struct Raw {
    Raw8<T> x, dy;
  };
  __device__ Raw fetch8(std::size_t a) const {
    return {kernels::fetch8(x, a), kernels::fetch8(dy, a)};
  }
  __device__ void values8(const Raw& raw, std::size_t c0, Sums<2> (&out)[kVector8]) const {
    float gs[kVector8], xs[kVector8];
    widen8(raw.dy, gs);
    widen8(raw.x, xs);
#pragma unroll
    for (unsigned k = 0; k < kVector8; ++k)
      out[k] = {{gs[k], bn_dy_xhat(gs[k], xs[k], mean[c0 + k], invstd[c0 + k])}};
  }
};

// ---- the one-pass statistics (kernels/batch_norm_welford.cuh) -------------

// What a channel's merged partials become: mean[c], m2[c]; *count_keep = the
// element count; with `sums` (--sync-bn) also sums[c] = count * mean[c] and
// sums[channels] = count, the first all-reduce's operands.
template <typename T>
struct WelfordFinish {
  const T* x;
  std::size_t inner;
  bool any;  // outer * inner > 0: the shift can be read
  float* mean;
  float* m2;
  float* count_keep;
  float* sums;
  std::size_t channels;
  float count;
  __device__ float shift(std::size_t c) const { return any ? load(x, c * inner) : 0.0f; }
  __device__ void operator()(std::size_t c, const Welford& w) const {
    const float m = welford_mean(w, shift(c));
    mean[c] = m;
    m2[c] = w.m2;
    if (sums != nullptr) sums[c] = welford_weighted_mean(count, m);
    if (c == 0) {
      *count_keep = count;
      if (sums != nullptr) sums[channels] = count;
    }
  }
};

__device__ void store_partial(float* partial, std::size_t slice, std::size_t channels,
                              std::size_t c, const Welford& w) {
  partial[(slice * kWelfordFloats + 0) * channels + c] = w.count;
  partial[(slice * kWelfordFloats + 1) * channels + c] = w.mean;
  partial[(slice * kWelfordFloats + 2) * channels + c] = w.m2;
}

// inner == 1: block (channel tile, slice), thread (x, y) over rows begin + y,
// begin + y + 8, ... (a warp reads 32 consecutive values of a row); row 0 of
// threads merges the 8 partials in order.
template <typename T>
__global__ void welford_rows_kernel(std::size_t outer, std::size_t channels,
                                    std::size_t rows_per_slice, WelfordFinish<T> finish,
                                    float* __restrict__ partial) {
  __shared__ Welford part[kBiasTileRows][kBiasTileChannels + 1];
  const std::size_t c = blockIdx.x * kBiasTileChannels + threadIdx.x;
  const std::size_t slice = blockIdx.y;
  const std::size_t begin = bias_slice_begin(slice, rows_per_slice);
  const std::size_t end = bias_slice_end(slice, rows_per_slice, outer);
  Welford w{0.0f, 0.0f, 0.0f};
  if (c < channels) {
    const float k = finish.shift(c);
    const T* x = finish.x;
    // Four rows' values loaded before any is used (four loads in flight per
    // thread), then taken in row order, as the one-row loop takes them.
    constexpr std::size_t kStep = kBiasTileRows;
    std::size_t r = begin + threadIdx.y;
    for (; r + 3 * kStep < end; r += 4 * kStep) {
      const float v0 = load(x, r * channels + c);
      const float v1 = load(x, (r + kStep) * channels + c);
      const float v2 = load(x, (r + 2 * kStep) * channels + c);
      const float v3 = load(x, (r + 3 * kStep) * channels + c);
      welford_update(w, v0, k);
      welford_update(w, v1, k);
      welford_update(w, v2, k);
      welford_update(w, v3, k);
    }
    for (; r < end; r += kStep) welford_update(w, load(x, r * channels + c), k);
  }
  part[threadIdx.y][threadIdx.x] = w;
  __syncthreads();
  if (threadIdx.y != 0 || c >= channels) return;
  for (unsigned j = 1; j < kBiasTileRows; ++j) w = welford_merge(w, part[j][threadIdx.x]);
  if (partial == nullptr)
    finish(c, w);
  else
    store_partial(partial, slice, channels, c, w);
}

// inner == 1 with 8 | channels and x 16-byte aligned: the same partials,
// with a thread per 8 consecutive channels of the tile (one 16-byte load of a
// row's 8 bf16 values where a thread loaded 2 bytes) and the same rows:
// thread (x, y) of the 4 x 8 block keeps channels 8x ... 8x + 7 of the tile
// over rows begin + y, begin + y + 8, ..., each channel's elements in the
// order welford_rows_kernel's thread (8x + k, y) takes them (one count for
// the 8), then a thread per channel merges the 8 row partials in order.
constexpr unsigned kWelfordVectorLanes = kBiasTileChannels / kVector8;  // 4
template <typename T>
__global__ void __launch_bounds__(kWelfordVectorLanes* kBiasTileRows, 16)
    welford_rows8_kernel(std::size_t outer, std::size_t channels, std::size_t rows_per_slice,
                         WelfordFinish<T> finish, float* __restrict__ partial) {
  __shared__ Welford part[kBiasTileRows][kBiasTileChannels + 1];
  const std::size_t tile = blockIdx.x * kBiasTileChannels;
  const std::size_t c0 = tile + threadIdx.x * kVector8;  // this thread's first channel
  const std::size_t slice = blockIdx.y;
  const std::size_t begin = bias_slice_begin(slice, rows_per_slice);
  const std::size_t end = bias_slice_end(slice, rows_per_slice, outer);
  float count = 0.0f, mean[kVector8] = {}, m2[kVector8] = {};
  if (c0 < channels) {  // 8 | channels: all 8 are channels
    float shift[kVector8];
#pragma unroll
    for (unsigned k = 0; k < kVector8; ++k) shift[k] = finish.shift(c0 + k);
    // Eight values of row r, widened.
    const auto row = [&](std::size_t r, float(&v)[kVector8]) {
      load8(finish.x, r * channels + c0, v);
    };
    const auto update = [&](const float(&v)[kVector8]) {
      count = add_rn(count, 1.0f);
      const float reciprocal = welford_reciprocal(count);
#pragma unroll
      for (unsigned k = 0; k < kVector8; ++k)
        welford_update_moments(reciprocal, v[k], shift[k], mean[k], m2[k]);
    };
    constexpr std::size_t kStep = kBiasTileRows;
    std::size_t r = begin + threadIdx.y;
    // Four rows' loads in flight before any is taken, in row order: a
    // one-warp block waits out the memory's latency once per four rows
    // (two left the stream at a fraction of the bandwidth).
    for (; r + 3 * kStep < end; r += 4 * kStep) {
      float v0[kVector8], v1[kVector8], v2[kVector8], v3[kVector8];
      row(r, v0);
      row(r + kStep, v1);
      row(r + 2 * kStep, v2);
      row(r + 3 * kStep, v3);
      update(v0);
      update(v1);
      update(v2);
      update(v3);
    }
    for (; r < end; r += kStep) {
      float v[kVector8];
      row(r, v);
      update(v);
    }
  }
#pragma unroll
  for (unsigned k = 0; k < kVector8; ++k)
    part[threadIdx.y][threadIdx.x * kVector8 + k] = Welford{count, mean[k], m2[k]};
  __syncthreads();
  // Thread t of the block merges channel tile + t's 8 row partials in order.
  const unsigned t = threadIdx.y * kWelfordVectorLanes + threadIdx.x;
  const std::size_t c = tile + t;
  if (c >= channels) return;
  Welford w = part[0][t];
  for (unsigned j = 1; j < kBiasTileRows; ++j) w = welford_merge(w, part[j][t]);
  if (partial == nullptr)
    finish(c, w);
  else
    store_partial(partial, slice, channels, c, w);
}

// inner > 1: block (channel, slice); thread t over the slice's elements t,
// t + blockDim.x, ... of that channel's planes in memory order (no division
// per element), then a tree in shared memory.
template <typename T>
__global__ void welford_planes_kernel(std::size_t outer, std::size_t channels, std::size_t inner,
                                      std::size_t rows_per_slice, WelfordFinish<T> finish,
                                      float* __restrict__ partial) {
  __shared__ Welford part[kBiasPlaneThreads];
  const std::size_t c = blockIdx.x;
  const std::size_t slice = blockIdx.y;
  const std::size_t end = bias_slice_end(slice, rows_per_slice, outer);
  const std::size_t step_rows = blockDim.x / inner, step_i = blockDim.x % inner;
  std::size_t o = bias_slice_begin(slice, rows_per_slice) + threadIdx.x / inner;
  std::size_t i = threadIdx.x % inner;
  const float k = finish.shift(c);
  const T* x = finish.x;
  Welford w{0.0f, 0.0f, 0.0f};
  while (o < end) {
    welford_update(w, load(x, (o * channels + c) * inner + i), k);
    o += step_rows;
    i += step_i;
    if (i >= inner) {
      i -= inner;
      ++o;
    }
  }
  part[threadIdx.x] = w;
  __syncthreads();
  for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s)
      part[threadIdx.x] = welford_merge(part[threadIdx.x], part[threadIdx.x + s]);
    __syncthreads();
  }
  if (threadIdx.x != 0) return;
  if (partial == nullptr)
    finish(c, part[0]);
  else
    store_partial(partial, slice, channels, c, part[0]);
}

// A channel's slice partials merged in slice order, then finished; staged
// as channel_finish_kernel stages its sums (kernels/channel_reduce.cuh). A
// slice's count is every channel's, so each chunk's merge steps (the
// divisions) are made once, by a thread per slice, from the counts merged
// before it (one thread's additions), and each channel's chain of merges
// holds a subtraction, products and sums.
template <typename T>
__global__ void __launch_bounds__(kSliceMergeThreads)
    welford_slices_kernel(const float* __restrict__ partial, std::size_t channels,
                          std::size_t slices, WelfordFinish<T> finish) {
  constexpr int K = static_cast<int>(kWelfordFloats);
  __shared__ float staged[kSliceMergeChunk][K][kSliceMergeChannels];
  __shared__ float before[kSliceMergeChunk];  // the count merged before each slice
  __shared__ WelfordMergeStep steps[kSliceMergeChunk];
  static_assert(kSliceMergeChunk <= kSliceMergeThreads, "a thread per slice of a chunk");
  const std::size_t c0 = blockIdx.x * static_cast<std::size_t>(kSliceMergeChannels);
  const std::size_t c = c0 + threadIdx.x;  // for the first warp's threads
  const bool merges = threadIdx.x < kSliceMergeChannels && c < channels;
  Welford w{0.0f, 0.0f, 0.0f};
  float merged = 0.0f;  // thread 0's: the count of the slices merged so far
  for (std::size_t s0 = 0; s0 < slices; s0 += kSliceMergeChunk) {
    const unsigned n = slice_chunk(s0, slices);
    stage_slices<K>(partial, channels, c0, s0, n, staged);
    __syncthreads();
    // A slice's count: its first channel's (staged[j][0][0]), every channel's.
    if (threadIdx.x == 0)
      for (unsigned j = 0; j < n; ++j) {
        before[j] = merged;
        merged = welford_merged_count(merged, staged[j][0][0]);
      }
    __syncthreads();
    if (threadIdx.x < n)
      steps[threadIdx.x] = welford_merge_step(before[threadIdx.x], staged[threadIdx.x][0][0]);
    __syncthreads();
    if (merges)
      for (unsigned j = 0; j < n; ++j)
        w = welford_merge_by(w,
                             Welford{staged[j][0][threadIdx.x], staged[j][1][threadIdx.x],
                                     staged[j][2][threadIdx.x]},
                             steps[j]);
    __syncthreads();  // before the next chunk is staged over this one
  }
  if (merges) finish(c, w);
}

// --sync-bn's step between the two all-reduces: sums[0, C] holds the sums over
// the ranks of count * mean and of count; mean (this rank's) becomes the
// global mean and sums[c] this rank's term of the global M2.
__global__ void welford_rank_kernel(float* sums, std::size_t c, float local_count, float* mean,
                                    const float* m2, float* count_keep) {
  const std::size_t ch = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (ch >= c) return;
  const float count = sums[c];
  const float global = welford_global_mean(sums[ch], count);
  sums[ch] = welford_rank_m2(m2[ch], local_count, mean[ch], global);
  mean[ch] = global;
  if (ch == 0) *count_keep = count;
}

cudaStream_t s_of(void* stream) {
  return static_cast<cudaStream_t>(stream);
}

__global__ void finalize_kernel(const float* m2, const float* count_ptr, std::size_t c, float eps,
                                float momentum, bool update_running, const float* mean,
                                float* invstd, float* running_mean, float* running_var) {
  const std::size_t ch = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (ch >= c) return;
  const float count = *count_ptr;
  const float var = m2[ch] / count;
  invstd[ch] = bn_invstd(var, eps);
  if (update_running) {
    running_mean[ch] = bn_running_mean(running_mean[ch], mean[ch], momentum);
    running_var[ch] = bn_running_var(running_var[ch], var, count, momentum);
  }
}

__global__ void eval_stats_kernel(const float* running_mean, const float* running_var,
                                  std::size_t c, float eps, float* mean, float* invstd) {
  const std::size_t ch = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (ch < c) {
    mean[ch] = running_mean[ch];
    invstd[ch] = bn_invstd(running_var[ch], eps);
  }
}

// The elementwise passes: 32-bit indices and no division where the element
// count allows (kernels/fast_divide.cuh; a 64-bit division per element made
// these memory-bound kernels compute-bound).
// x and y of the storage type T; precision: the grid an fp32 y is rounded to
// (a 16-bit T rounds as it stores).
template <typename Index, typename ChannelOf, typename T>
__global__ void apply_kernel(const T* __restrict__ x, T* __restrict__ y, Index total,
                             ChannelOf channel_of, const float* mean, const float* invstd,
                             const float* gamma, const float* beta, DType precision) {
  const Index stride = static_cast<Index>(gridDim.x) * static_cast<Index>(blockDim.x);
  for (Index i = static_cast<Index>(blockIdx.x) * static_cast<Index>(blockDim.x) + threadIdx.x;
       i < total; i += stride) {
    const Index ch = channel_of(i);
    store(y, i,
          round_to_precision_grid(
              bn_apply_element(load(x, i), mean[ch], invstd[ch], gamma, beta, static_cast<int>(ch)),
              precision));
  }
}

// x and dy of the storage type T, dx of D (T, or fp32 where the model sums).
template <typename Index, typename ChannelOf, typename T, typename D>
__global__ void backward_dx_kernel(const T* __restrict__ x, const T* __restrict__ dy,
                                   D* __restrict__ dx, Index total, Index c, ChannelOf channel_of,
                                   const float* count_ptr, const float* mean, const float* invstd,
                                   const float* gamma, const float* sums, DType precision) {
  const float count = *count_ptr;
  const Index stride = static_cast<Index>(gridDim.x) * static_cast<Index>(blockDim.x);
  for (Index i = static_cast<Index>(blockIdx.x) * static_cast<Index>(blockDim.x) + threadIdx.x;
       i < total; i += stride) {
    const Index ch = channel_of(i);
    store(dx, i,
          round_to_precision_grid(bn_backward_element(load(x, i), load(dy, i), mean[ch], invstd[ch],
                                                      gamma != nullptr ? gamma[ch] : 1.0f, sums[ch],
                                                      sums[c + ch], count),
                                  precision));
  }
}

// Whether a grid-stride loop over n elements can count in 32 bits (its index
// reaches n plus the grid's size).
bool fits_32_bits(std::size_t n) {
  return n + static_cast<std::size_t>(elementwise_blocks(n)) * kElementwiseThreads <= UINT32_MAX;
}

template <typename T>
__global__ void gap_forward_kernel(const T* __restrict__ x, T* __restrict__ y, std::size_t planes,
                                   std::size_t hw) {
  for (std::size_t p = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; p < planes;
       p += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    float acc = 0.0f;
    for (std::size_t i = 0; i < hw; ++i) acc += load(x, p * hw + i);
    store(y, p, acc / static_cast<float>(hw));
  }
}

template <typename T, typename D>
__global__ void gap_backward_kernel(const T* __restrict__ dy, D* __restrict__ dx, std::size_t total,
                                    std::size_t hw) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x)
    store(dx, i, load(dy, i / hw) / static_cast<float>(hw));
}

unsigned per_channel_blocks(std::size_t c) {
  return static_cast<unsigned>((c + 255) / 256);
}

}  // namespace

void batch_norm_welford_cuda(const void* x, DType t, std::size_t n, std::size_t c, std::size_t hw,
                             float* mean, float* m2, float* count_keep, float* sums, float* scratch,
                             std::size_t scratch_floats, void* stream) {
  if (c == 0) return;
  const cudaStream_t s = s_of(stream);
  std::size_t outer = n, inner = hw;
  if (inner == 0) {  // no element: count 0
    inner = 1;
    outer = 0;
  }
  const BiasGradSplit split =
      welford_split(outer, c, inner, scratch != nullptr ? scratch_floats : 0);
  float* partial = split.slices == 1 ? nullptr : scratch;
  const dim3 grid(static_cast<unsigned>(split.channel_blocks), static_cast<unsigned>(split.slices));
  with_storage(t, [&](auto storage) {
    using T = decltype(storage);
    const WelfordFinish<T> finish{
        static_cast<const T*>(x),  inner, outer > 0, mean, m2, count_keep, sums, c,
        static_cast<float>(n * hw)};
    if (inner == 1 && c % kVector8 == 0 && vector8_aligned(static_cast<const T*>(x)))
      welford_rows8_kernel<T><<<grid, dim3(kWelfordVectorLanes, kBiasTileRows), 0, s>>>(
          outer, c, split.rows_per_slice, finish, partial);
    else if (inner == 1)
      welford_rows_kernel<T><<<grid, dim3(kBiasTileChannels, kBiasTileRows), 0, s>>>(
          outer, c, split.rows_per_slice, finish, partial);
    else
      welford_planes_kernel<T><<<grid, kBiasPlaneThreads, 0, s>>>(
          outer, c, inner, split.rows_per_slice, finish, partial);
    RT_CUDA_CHECK_LAUNCH();
    if (partial == nullptr) return;
    welford_slices_kernel<T>
        <<<slice_merge_blocks(c), kSliceMergeThreads, 0, s>>>(partial, c, split.slices, finish);
    RT_CUDA_CHECK_LAUNCH();
  });
}

void batch_norm_welford_ranks_cuda(float* sums, std::size_t c, float local_count, float* mean,
                                   const float* m2, float* count_keep, void* stream) {
  if (c == 0) return;
  welford_rank_kernel<<<per_channel_blocks(c), 256, 0, s_of(stream)>>>(sums, c, local_count, mean,
                                                                       m2, count_keep);
  RT_CUDA_CHECK_LAUNCH();
}

void batch_norm_finalize_cuda(const float* m2, const float* count_ptr, std::size_t c, float eps,
                              float momentum, bool update_running, const float* mean, float* invstd,
                              float* running_mean, float* running_var, void* stream) {
  if (c == 0) return;
  finalize_kernel<<<per_channel_blocks(c), 256, 0, s_of(stream)>>>(
      m2, count_ptr, c, eps, momentum, update_running, mean, invstd, running_mean, running_var);
  RT_CUDA_CHECK_LAUNCH();
}

void batch_norm_eval_stats_cuda(const float* running_mean, const float* running_var, std::size_t c,
                                float eps, float* mean, float* invstd, void* stream) {
  if (c == 0) return;
  eval_stats_kernel<<<per_channel_blocks(c), 256, 0, s_of(stream)>>>(running_mean, running_var, c,
                                                                     eps, mean, invstd);
  RT_CUDA_CHECK_LAUNCH();
}

void batch_norm_apply_cuda(const void* x, void* y, DType t, std::size_t n, std::size_t c,
                           std::size_t hw, const float* mean, const float* invstd,
                           const float* gamma, const float* beta, DType precision, void* stream) {
  const std::size_t total = n * c * hw;
  if (total == 0) return;
  const auto blocks = elementwise_blocks(total);
  with_storage(t, [&](auto s) {
    using T = decltype(s);
    const auto* xs = static_cast<const T*>(x);
    auto* ys = static_cast<T*>(y);
    if (fits_32_bits(total))
      apply_kernel<std::uint32_t><<<blocks, kElementwiseThreads, 0, s_of(stream)>>>(
          xs, ys, static_cast<std::uint32_t>(total),
          ChannelOf32(static_cast<std::uint32_t>(c), static_cast<std::uint32_t>(hw)), mean, invstd,
          gamma, beta, precision);
    else
      apply_kernel<std::size_t><<<blocks, kElementwiseThreads, 0, s_of(stream)>>>(
          xs, ys, total, ChannelOfWide{c, hw}, mean, invstd, gamma, beta, precision);
  });
  RT_CUDA_CHECK_LAUNCH();
}

void batch_norm_backward_reduce_cuda(const void* x, const void* dy, DType t, std::size_t n,
                                     std::size_t c, std::size_t hw, const float* mean,
                                     const float* invstd, float* sums, float* dgamma, float* dbeta,
                                     bool accumulate, float* scratch, std::size_t scratch_floats,
                                     void* stream) {
  with_storage(t, [&](auto s) {
    using T = decltype(s);
    reduce_channels<2>(
        n, c, hw,
        BackwardValue<T>{static_cast<const T*>(x), static_cast<const T*>(dy), mean, invstd},
        BnBackwardFinish{sums, c, dgamma, dbeta, accumulate}, scratch, scratch_floats, stream);
  });
}

void batch_norm_backward_dx_cuda(const void* x, const void* dy, DType t, void* dx, DType dx_type,
                                 std::size_t n, std::size_t c, std::size_t hw, const float* mean,
                                 const float* invstd, const float* gamma, const float* sums,
                                 const float* count_ptr, DType precision, void* stream) {
  const std::size_t total = n * c * hw;
  if (total == 0) return;
  const auto blocks = elementwise_blocks(total);
  with_storage_pair(t, dx_type, [&](auto s, auto d) {
    using T = decltype(s);
    using D = decltype(d);
    const auto* xs = static_cast<const T*>(x);
    const auto* dys = static_cast<const T*>(dy);
    auto* dxs = static_cast<D*>(dx);
    if (fits_32_bits(total))
      backward_dx_kernel<std::uint32_t><<<blocks, kElementwiseThreads, 0, s_of(stream)>>>(
          xs, dys, dxs, static_cast<std::uint32_t>(total), static_cast<std::uint32_t>(c),
          ChannelOf32(static_cast<std::uint32_t>(c), static_cast<std::uint32_t>(hw)), count_ptr,
          mean, invstd, gamma, sums, precision);
    else
      backward_dx_kernel<std::size_t><<<blocks, kElementwiseThreads, 0, s_of(stream)>>>(
          xs, dys, dxs, total, c, ChannelOfWide{c, hw}, count_ptr, mean, invstd, gamma, sums,
          precision);
  });
  RT_CUDA_CHECK_LAUNCH();
}

void global_avg_pool_forward_cuda(const void* x, void* y, DType t, std::size_t planes,
                                  std::size_t hw, void* stream) {
  if (planes == 0) return;
  with_storage(t, [&](auto storage) {
    using T = decltype(storage);
    gap_forward_kernel<<<elementwise_blocks(planes), kElementwiseThreads, 0, s_of(stream)>>>(
        static_cast<const T*>(x), static_cast<T*>(y), planes, hw);
  });
  RT_CUDA_CHECK_LAUNCH();
}

void global_avg_pool_backward_cuda(const void* dy, DType t, void* dx, DType dx_type,
                                   std::size_t planes, std::size_t hw, void* stream) {
  const std::size_t total = planes * hw;
  if (total == 0) return;
  with_storage_pair(t, dx_type, [&](auto storage, auto dx_storage) {
    using T = decltype(storage);
    using D = decltype(dx_storage);
    gap_backward_kernel<<<elementwise_blocks(total), kElementwiseThreads, 0, s_of(stream)>>>(
        static_cast<const T*>(dy), static_cast<D*>(dx), total, hw);
  });
  RT_CUDA_CHECK_LAUNCH();
}

}  // namespace ringtrain::kernels
