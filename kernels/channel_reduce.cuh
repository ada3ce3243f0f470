// A deterministic per-channel reduction on a GPU, for .cu files only (it
// launches kernels): over an [outer, channels, inner] tensor (NCHW is
// [N, C, H*W], NHWC and a Linear's rows [rows, C, 1]) it sums K values per
// element, given by a Value functor (flat index, channel) -> Sums<K>, and hands
// each channel's totals to a Finish functor (channel, Sums<K>). The bias
// gradient (kernels/bias.cu) and BatchNorm's backward sums
// (kernels/batch_norm.cu, kernels/batch_norm_relu.cu) are instances;
// BatchNorm's one-pass statistics split the work the same way but merge
// Welford partials instead of adding sums (kernels/batch_norm_welford.cuh).
//
// The work is split as kernels/bias.cuh's bias_grad_split says: thread blocks
// over (channel group, row slice), each summing its part in a fixed order,
// then the slices' partials, kept in `scratch`, added in slice order. No float
// atomics: bit-for-bit repeatable, and a function of the shape alone. One
// block per channel striding over N*H*W (what BatchNorm had before) left most
// of a GPU idle at 64 channels and, in NHWC, read every element C floats apart
// from its neighbour's.
#pragma once

#include <cstddef>
#include <type_traits>

#include "core/cuda/check_cuda.h"
#include "kernels/bias.cuh"
#include "kernels/vector8.cuh"

namespace ringtrain::kernels {

template <int K>
struct Sums {
  float v[K];
};

// inner == 1: block (channel tile, slice); thread (x, y) sums rows begin + y,
// begin + y + 8, ... of channel tile * 32 + x (a warp reads 32 consecutive
// floats of a row), then row 0 of threads adds the 8 partials in order. With
// `partial` null the block finishes its channels; else it writes
// partial[(slice * K + k) * channels + c].
template <int K, typename Value, typename Finish>
__global__ void channel_rows_kernel(std::size_t outer, std::size_t channels,
                                    std::size_t rows_per_slice, Value value, Finish finish,
                                    float* __restrict__ partial) {
  __shared__ float part[K][kBiasTileRows][kBiasTileChannels + 1];
  const std::size_t c = blockIdx.x * kBiasTileChannels + threadIdx.x;
  const std::size_t slice = blockIdx.y;
  const std::size_t begin = bias_slice_begin(slice, rows_per_slice);
  const std::size_t end = bias_slice_end(slice, rows_per_slice, outer);
  Sums<K> sum{};
  if (c < channels) {
    // Four rows' values loaded before any is added (four loads in flight per
    // thread: one at a time left the memory system idle), then added in row
    // order, as the one-row loop adds them.
    constexpr std::size_t kStep = kBiasTileRows;
    std::size_t r = begin + threadIdx.y;
    for (; r + 3 * kStep < end; r += 4 * kStep) {
      const Sums<K> v0 = value(r * channels + c, c);
      const Sums<K> v1 = value((r + kStep) * channels + c, c);
      const Sums<K> v2 = value((r + 2 * kStep) * channels + c, c);
      const Sums<K> v3 = value((r + 3 * kStep) * channels + c, c);
      for (int k = 0; k < K; ++k) sum.v[k] = (((sum.v[k] + v0.v[k]) + v1.v[k]) + v2.v[k]) + v3.v[k];
      emit(value, r * channels + c, v0);
      emit(value, (r + kStep) * channels + c, v1);
      emit(value, (r + 2 * kStep) * channels + c, v2);
      emit(value, (r + 3 * kStep) * channels + c, v3);
    }
    for (; r < end; r += kStep) {
      const Sums<K> v = value(r * channels + c, c);
      for (int k = 0; k < K; ++k) sum.v[k] += v.v[k];
      emit(value, r * channels + c, v);
    }
  }
  for (int k = 0; k < K; ++k) part[k][threadIdx.y][threadIdx.x] = sum.v[k];
  __syncthreads();
  if (threadIdx.y != 0 || c >= channels) return;
  for (int k = 0; k < K; ++k)
    for (unsigned j = 1; j < kBiasTileRows; ++j) sum.v[k] += part[k][j][threadIdx.x];
  if (partial == nullptr) {
    finish(c, sum);
  } else {
    for (int k = 0; k < K; ++k) partial[(slice * K + k) * channels + c] = sum.v[k];
  }
}

// A Value that can give 8 consecutive channels of a row at once says so with
// `bool rows8_aligned() const` (host: whether its buffers are 16-byte
// aligned) and `values8(a, c0, out)` (device: elements a ... a + 7, of
// channels c0 ... c0 + 7).
template <typename V, typename = void>
struct has_rows8 : std::false_type {};
template <typename V>
struct has_rows8<V, std::void_t<decltype(&V::rows8_aligned)>> : std::true_type {};

// A Value whose rows are few bytes (16-bit data) may also split values8 in
// two: `Raw fetch8(a)` loads a row's 8 values as stored, `values8(raw, c0,
// out)` computes from them; with `kRowsInFlight` 4 the kernel then fetches
// that many rows before taking the first, in row order as ever (the same
// sums, bit for bit), with a row's bytes held, not its widened floats.
template <typename V, typename = void>
struct has_fetch8 : std::false_type {};
template <typename V>
struct has_fetch8<V, std::void_t<decltype(V::kRowsInFlight)>>
    : std::bool_constant<V::kRowsInFlight == 4> {
  static_assert(V::kRowsInFlight == 2 || V::kRowsInFlight == 4, "two or four rows in flight");
};

// A Value that also writes each element's value somewhere (the fused
// BatchNorm's masked dy) does it in `emit(a, sums)` and `emit8(a, sums[8])`,
// which the kernels call after a group of rows' loads: a store between them
// would hold the next loads back (nvcc cannot move a load above a store that
// may alias it).
template <typename V, typename = void>
struct has_emit : std::false_type {};
template <typename V>
struct has_emit<V, std::void_t<decltype(&V::emit)>> : std::true_type {};
template <typename Value, int K>
__device__ __forceinline__ void emit(const Value& value, std::size_t a, const Sums<K>& v) {
  if constexpr (has_emit<Value>::value) value.emit(a, v);
}
template <typename Value, int K>
__device__ __forceinline__ void emit8(const Value& value, std::size_t a,
                                      const Sums<K> (&v)[kVector8]) {
  if constexpr (has_emit<Value>::value) value.emit8(a, v);
}

// inner == 1, 8 | channels, a Value with values8: channel_rows_kernel's sums
// with a thread per 8 consecutive channels of the tile (16-byte loads where a
// thread loaded 2 bytes) over the same rows: thread (x, y) of the 4 x 8 block
// adds channels 8x ... 8x + 7 over rows begin + y, begin + y + 8, ... in row
// order, as channel_rows_kernel's thread (8x + k, y) adds each, then a thread
// per channel adds the 8 row sums in order: the same bits.
constexpr unsigned kRows8Lanes = kBiasTileChannels / kVector8;  // 4
template <int K, typename Value, typename Finish>
// (Blocks of one warp: 16 of them an SM must fit its registers.)
__global__ void __launch_bounds__(kRows8Lanes* kBiasTileRows, 16)
    channel_rows8_kernel(std::size_t outer, std::size_t channels, std::size_t rows_per_slice,
                         Value value, Finish finish, float* __restrict__ partial) {
  __shared__ float part[K][kBiasTileRows][kBiasTileChannels + 1];
  const std::size_t tile = blockIdx.x * kBiasTileChannels;
  const std::size_t c0 = tile + threadIdx.x * kVector8;  // this thread's first channel
  const std::size_t slice = blockIdx.y;
  const std::size_t begin = bias_slice_begin(slice, rows_per_slice);
  const std::size_t end = bias_slice_end(slice, rows_per_slice, outer);
  Sums<K> sum[kVector8] = {};
  if (c0 < channels) {  // 8 | channels: all 8 are channels
    constexpr std::size_t kStep = kBiasTileRows;
    std::size_t r = begin + threadIdx.y;
    // Four rows fetched before any is taken, where the Value can (16-bit
    // rows: a one-warp block otherwise waits out the memory's latency every
    // other row); the rows and their order are those of the loops below.
    if constexpr (has_fetch8<Value>::value) {
      for (; r + 3 * kStep < end; r += 4 * kStep) {
        const typename Value::Raw q[4] = {value.fetch8(r * channels + c0),
                                          value.fetch8((r + kStep) * channels + c0),
                                          value.fetch8((r + 2 * kStep) * channels + c0),
                                          value.fetch8((r + 3 * kStep) * channels + c0)};
#pragma unroll
        for (unsigned j = 0; j < 4; ++j) {
          Sums<K> v[kVector8];
          value.values8(q[j], c0, v);
#pragma unroll
          for (unsigned k = 0; k < kVector8; ++k)
            for (int e = 0; e < K; ++e) sum[k].v[e] += v[k].v[e];
          emit8(value, (r + j * kStep) * channels + c0, v);
        }
      }
    }
    // Two rows' loads in flight before either is added, in row order.
    for (; r + kStep < end; r += 2 * kStep) {
      Sums<K> v0[kVector8], v1[kVector8];
      value.values8(r * channels + c0, c0, v0);
      value.values8((r + kStep) * channels + c0, c0, v1);
#pragma unroll
      for (unsigned k = 0; k < kVector8; ++k)
        for (int q = 0; q < K; ++q) sum[k].v[q] = (sum[k].v[q] + v0[k].v[q]) + v1[k].v[q];
      emit8(value, r * channels + c0, v0);
      emit8(value, (r + kStep) * channels + c0, v1);
    }
    for (; r < end; r += kStep) {
      Sums<K> v[kVector8];
      value.values8(r * channels + c0, c0, v);
#pragma unroll
      for (unsigned k = 0; k < kVector8; ++k)
        for (int q = 0; q < K; ++q) sum[k].v[q] += v[k].v[q];
      emit8(value, r * channels + c0, v);
    }
  }
#pragma unroll
  for (unsigned k = 0; k < kVector8; ++k)
    for (int q = 0; q < K; ++q) part[q][threadIdx.y][threadIdx.x * kVector8 + k] = sum[k].v[q];
  __syncthreads();
  // Thread t of the block adds channel tile + t's 8 row sums in order.
  const unsigned t = threadIdx.y * kRows8Lanes + threadIdx.x;
  const std::size_t c = tile + t;
  if (c >= channels) return;
  Sums<K> total;
  for (int q = 0; q < K; ++q) {
    total.v[q] = part[q][0][t];
    for (unsigned j = 1; j < kBiasTileRows; ++j) total.v[q] += part[q][j][t];
  }
  if (partial == nullptr) {
    finish(c, total);
  } else {
    for (int q = 0; q < K; ++q) partial[(slice * K + q) * channels + c] = total.v[q];
  }
}

// inner > 1: block (channel, slice) walks the slice's rows of that channel's
// planes in memory order, blockDim.x elements apart per thread (no division
// per element), then a tree in shared memory.
template <int K, typename Value, typename Finish>
__global__ void channel_planes_kernel(std::size_t outer, std::size_t channels, std::size_t inner,
                                      std::size_t rows_per_slice, Value value, Finish finish,
                                      float* __restrict__ partial) {
  __shared__ float part[K][kBiasPlaneThreads];
  const std::size_t c = blockIdx.x;
  const std::size_t slice = blockIdx.y;
  const std::size_t end = bias_slice_end(slice, rows_per_slice, outer);
  const std::size_t step_rows = blockDim.x / inner, step_i = blockDim.x % inner;
  std::size_t o = bias_slice_begin(slice, rows_per_slice) + threadIdx.x / inner;
  std::size_t i = threadIdx.x % inner;
  Sums<K> sum{};
  while (o < end) {
    const Sums<K> v = value((o * channels + c) * inner + i, c);
    for (int k = 0; k < K; ++k) sum.v[k] += v.v[k];
    emit(value, (o * channels + c) * inner + i, v);
    o += step_rows;
    i += step_i;
    if (i >= inner) {
      i -= inner;
      ++o;
    }
  }
  for (int k = 0; k < K; ++k) part[k][threadIdx.x] = sum.v[k];
  __syncthreads();
  for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s)
      for (int k = 0; k < K; ++k) part[k][threadIdx.x] += part[k][threadIdx.x + s];
    __syncthreads();
  }
  if (threadIdx.x != 0) return;
  for (int k = 0; k < K; ++k) sum.v[k] = part[k][0];
  if (partial == nullptr) {
    finish(c, sum);
  } else {
    for (int k = 0; k < K; ++k) partial[(slice * K + k) * channels + c] = sum.v[k];
  }
}

// The kernels that take the slices' partials in slice order (here, and the
// Welford merge in kernels/batch_norm.cu): a block of kSliceMergeThreads
// threads serves kSliceMergeChannels channels. Its threads stage the partials
// of kSliceMergeChunk slices in shared memory together (rows of consecutive
// channels, all loads in flight at once), then its first warp takes them in
// slice order, a thread per channel: the operations and order of one thread
// walking the slices, without a round trip to L2 per slice (resnet50's
// 64-channel layers have 1024 slices).
constexpr unsigned kSliceMergeChannels = 32;
constexpr unsigned kSliceMergeThreads = 256;
constexpr unsigned kSliceMergeChunk = 64;
// The chunk that starts at slice s0: how many slices it has.
__device__ __forceinline__ unsigned slice_chunk(std::size_t s0, std::size_t slices) {
  return static_cast<unsigned>(slices - s0 < kSliceMergeChunk ? slices - s0 : kSliceMergeChunk);
}
// Stages partial[(s * K + k) * channels + c] of the chunk's slices and the
// block's channels into staged[s - s0][k][c - c0] (0 past the channels).
template <int K>
__device__ __forceinline__ void stage_slices(const float* __restrict__ partial,
                                             std::size_t channels, std::size_t c0, std::size_t s0,
                                             unsigned n, float (*staged)[K][kSliceMergeChannels]) {
  const unsigned lane = threadIdx.x % kSliceMergeChannels;
  const std::size_t c = c0 + lane;
  for (unsigned q = threadIdx.x / kSliceMergeChannels; q < n * K;
       q += kSliceMergeThreads / kSliceMergeChannels)
    staged[q / K][q % K][lane] = c < channels ? partial[(s0 * K + q) * channels + c] : 0.0f;
}

// A channel's partials added in slice order, then finished.
template <int K, typename Finish>
__global__ void __launch_bounds__(kSliceMergeThreads)
    channel_finish_kernel(const float* __restrict__ partial, std::size_t channels,
                          std::size_t slices, Finish finish) {
  __shared__ float staged[kSliceMergeChunk][K][kSliceMergeChannels];
  const std::size_t c0 = blockIdx.x * static_cast<std::size_t>(kSliceMergeChannels);
  const std::size_t c = c0 + threadIdx.x;  // for the first warp's threads
  const bool adds = threadIdx.x < kSliceMergeChannels && c < channels;
  Sums<K> sum{};
  for (std::size_t s0 = 0; s0 < slices; s0 += kSliceMergeChunk) {
    const unsigned n = slice_chunk(s0, slices);
    stage_slices<K>(partial, channels, c0, s0, n, staged);
    __syncthreads();
    if (adds)
      for (unsigned j = 0; j < n; ++j)
        for (int k = 0; k < K; ++k) sum.v[k] += staged[j][k][threadIdx.x];
    __syncthreads();  // before the next chunk is staged over this one
  }
  if (adds) finish(c, sum);
}
// Blocks of channel_finish_kernel and the Welford merge.
inline unsigned slice_merge_blocks(std::size_t channels) {
  return static_cast<unsigned>((channels + kSliceMergeChannels - 1) / kSliceMergeChannels);
}

// The launches on `stream`: one kernel when a single slice suffices (small
// tensors, or no scratch), else the blocks' partials in scratch (which must
// hold slices * K * channels floats; bias_grad_split keeps within
// scratch_floats / K) and a finishing kernel that adds them in slice order.
template <int K, typename Value, typename Finish>
void reduce_channels(std::size_t outer, std::size_t channels, std::size_t inner, Value value,
                     Finish finish, float* scratch, std::size_t scratch_floats, void* stream) {
  if (channels == 0) return;
  const auto s = static_cast<cudaStream_t>(stream);
  if (inner == 0) {  // nothing to sum: the totals are 0
    inner = 1;
    outer = 0;
  }
  const BiasGradSplit split =
      bias_grad_split(outer, channels, inner, scratch != nullptr ? scratch_floats / K : 0);
  float* partial = split.slices == 1 ? nullptr : scratch;
  const dim3 grid(static_cast<unsigned>(split.channel_blocks), static_cast<unsigned>(split.slices));
  // 8 channels a thread where the Value can, the shape and its buffers allow.
  bool by_8 = false;
  if constexpr (has_rows8<Value>::value) {
    by_8 = inner == 1 && channels % kVector8 == 0 && value.rows8_aligned();
    if (by_8)
      channel_rows8_kernel<K><<<grid, dim3(kRows8Lanes, kBiasTileRows), 0, s>>>(
          outer, channels, split.rows_per_slice, value, finish, partial);
  }
  if (!by_8 && inner == 1)
    channel_rows_kernel<K><<<grid, dim3(kBiasTileChannels, kBiasTileRows), 0, s>>>(
        outer, channels, split.rows_per_slice, value, finish, partial);
  else if (!by_8)
    channel_planes_kernel<K><<<grid, kBiasPlaneThreads, 0, s>>>(
        outer, channels, inner, split.rows_per_slice, value, finish, partial);
  RT_CUDA_CHECK_LAUNCH();
  if (partial == nullptr) return;
  channel_finish_kernel<K><<<slice_merge_blocks(channels), kSliceMergeThreads, 0, s>>>(
      partial, channels, split.slices, finish);
  RT_CUDA_CHECK_LAUNCH();
}

}  // namespace ringtrain::kernels
