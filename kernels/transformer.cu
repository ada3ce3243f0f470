// The GPT-2 class layers' kernels (launchers in kernels/transformer.h). Rows
// (a layer_norm row, a row of attention scores) go one per warp: the sums are
// lane-strided then combined by a butterfly of shuffles, a fixed order, so
// results repeat bit for bit. The token embedding's gradient avoids float
// atomics by sorting the ids (CUB's stable radix sort) and letting one block
// own each distinct id.
#include <math.h>

#include <cub/device/device_radix_sort.cuh>

#include "core/cuda/check_cuda.h"
#include "kernels/launch_shape.cuh"
#include "kernels/layer_norm_rows.cuh"
#include "kernels/storage.cuh"
#include "kernels/transformer.h"
#include "kernels/vector8.cuh"
#include "kernels/warp_rows.cuh"
#include "ringtrain/core/check.h"

namespace ringtrain::kernels {

namespace {

constexpr unsigned kGatherThreads = 256;

// The id of a float token, or vocab when it is not one.
__device__ __forceinline__ std::size_t token_of(float v, std::size_t vocab) {
  if (!(v >= 0.0f) || v != truncf(v) || v >= static_cast<float>(vocab)) return vocab;
  return static_cast<std::size_t>(v);
}

// y of a storage type T (kernels/storage.cuh): the fp32 row rounded as stored.
template <typename T>
__global__ void token_embedding_forward_kernel(const float* __restrict__ ids,
                                               const float* __restrict__ w, std::size_t n,
                                               std::size_t vocab, std::size_t dim,
                                               T* __restrict__ y) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    const std::size_t id = token_of(ids[i / dim], vocab);
    store(y, i, id < vocab ? w[id * dim + i % dim] : nanf(""));
  }
}

// Sort keys (ids; vocab for a bad one, which sorts last and is skipped) and
// the row indices they carry.
__global__ void token_keys_kernel(const float* __restrict__ ids, std::size_t rows,
                                  std::size_t vocab, unsigned* __restrict__ keys,
                                  unsigned* __restrict__ values) {
  const std::size_t r = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (r >= rows) return;
  keys[r] = static_cast<unsigned>(token_of(ids[r], vocab));
  values[r] = static_cast<unsigned>(r);
}

// Whether sorted position i starts a run of one valid id (the same answer
// for the whole block: its early return comes before any barrier).
__device__ __forceinline__ bool starts_run(const unsigned* keys, std::size_t i, std::size_t vocab) {
  const unsigned key = keys[i];
  return key < vocab && (i == 0 || keys[i - 1] != key);
}

// The end of the run that starts at i (sorted keys: the first later position
// whose key differs), found by the whole block, a block's width of keys at a
// time, where each thread scanning it alone was a chain of dependent loads
// as long as the run. Every thread of the block calls it.
__device__ std::size_t block_run_end(const unsigned* keys, std::size_t i, std::size_t rows) {
  __shared__ unsigned long long end;
  const unsigned key = keys[i];
  if (threadIdx.x == 0) end = rows;
  __syncthreads();
  for (std::size_t base = i + 1; base < rows; base += blockDim.x) {
    const std::size_t p = base + threadIdx.x;
    const bool other = p < rows && keys[p] != key;
    if (other) atomicMin(&end, static_cast<unsigned long long>(p));
    if (__syncthreads_or(other)) break;
  }
  __syncthreads();
  return end;
}

// Block i: if sorted position i starts a run of one id, add that run's dy
// rows to the id's dw row, in row order (the CPU's order too).
template <typename T>
__global__ void token_gather_kernel(const unsigned* __restrict__ keys,
                                    const unsigned* __restrict__ rows_of, const T* __restrict__ dy,
                                    std::size_t rows, std::size_t vocab, std::size_t dim,
                                    float* __restrict__ dw) {
  const std::size_t i = blockIdx.x;
  if (!starts_run(keys, i, vocab)) return;
  const std::size_t end = block_run_end(keys, i, rows);
  float* out = dw + static_cast<std::size_t>(keys[i]) * dim;
  for (std::size_t j = threadIdx.x; j < dim; j += blockDim.x) {
    float acc = out[j];
    for (std::size_t k = i; k < end; ++k)
      acc += load(dy, static_cast<std::size_t>(rows_of[k]) * dim + j);
    out[j] = acc;
  }
}

// The same sums, for a dim that 8 divides with 16-byte aligned buffers: a
// thread takes 8 columns (16-byte loads of dy), and the run's rows 8 at a
// time, every row index and dy load issued before the adds, which stay in row
// order per column (the same bits). A frequent token of real text ("," or
// " the": hundreds of rows a batch) was a chain of dependent loads, index
// then row, one row at a time.
constexpr unsigned kGather8Threads = 128;
constexpr unsigned kGatherRowsAhead = 8;
template <typename T>
__global__ void token_gather8_kernel(const unsigned* __restrict__ keys,
                                     const unsigned* __restrict__ rows_of, const T* __restrict__ dy,
                                     std::size_t rows, std::size_t vocab, std::size_t dim,
                                     float* __restrict__ dw) {
  const std::size_t i = blockIdx.x;
  if (!starts_run(keys, i, vocab)) return;
  const std::size_t end = block_run_end(keys, i, rows);
  float* out = dw + static_cast<std::size_t>(keys[i]) * dim;
  for (std::size_t col = threadIdx.x * std::size_t{kVector8}; col < dim;
       col += std::size_t{blockDim.x} * kVector8) {
    float acc[kVector8];
    load8(out, col, acc);
    std::size_t k = i;
    for (; k + kGatherRowsAhead <= end; k += kGatherRowsAhead) {
      float u[kGatherRowsAhead][kVector8];
#pragma unroll
      for (unsigned r = 0; r < kGatherRowsAhead; ++r)
        load8(dy, static_cast<std::size_t>(rows_of[k + r]) * dim + col, u[r]);
#pragma unroll
      for (unsigned r = 0; r < kGatherRowsAhead; ++r)
#pragma unroll
        for (unsigned e = 0; e < kVector8; ++e) acc[e] += u[r][e];
    }
    for (; k < end; ++k) {
      float u[kVector8];
      load8(dy, static_cast<std::size_t>(rows_of[k]) * dim + col, u);
#pragma unroll
      for (unsigned e = 0; e < kVector8; ++e) acc[e] += u[e];
    }
    store8(out, col, acc);
  }
}

__global__ void add_broadcast_rows_kernel(const float* x, const float* __restrict__ w, float* y,
                                          std::size_t total, std::size_t n) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x)
    y[i] = x[i] + w[i % n];
}

// kernels/layer_norm.cuh's row arithmetic, with the sums spread over a warp.
// x and y of a storage type T (kernels/storage.cuh), the sums in fp32.
template <typename T>
__global__ void layer_norm_forward_kernel(const T* __restrict__ x, const float* __restrict__ w,
                                          const float* __restrict__ b, std::size_t rows, unsigned c,
                                          float eps, T* __restrict__ y,
                                          float* __restrict__ mean_out,
                                          float* __restrict__ rstd_out) {
  const std::size_t row = warp_row();
  const unsigned lane = warp_lane();
  if (row >= rows) return;
  const T* xr = x + row * c;
  float s = 0.0f;
  for (unsigned j = lane; j < c; j += kWarp) s += load(xr, j);
  warp_layer_norm_row(xr, s, c, lane, eps, w, b, y + row * c, &mean_out[row], &rstd_out[row]);
}

// x and dy of a storage type T, dx of D (T, or fp32 where the model sums).
template <typename T, typename D>
__global__ void layer_norm_backward_kernel(const T* __restrict__ x, const float* __restrict__ w,
                                           const T* __restrict__ dy, std::size_t rows, unsigned c,
                                           const float* __restrict__ mean_in,
                                           const float* __restrict__ rstd_in, D* __restrict__ dx) {
  const std::size_t row = warp_row();
  const unsigned lane = warp_lane();
  if (row >= rows) return;
  const float mean = mean_in[row], rstd = rstd_in[row];
  const T* xr = x + row * c;
  const T* dyr = dy + row * c;
  const LayerNormRowSums s = warp_layer_norm_backward_sums(xr, dyr, w, c, lane, mean, rstd);
  D* dxr = dx + row * c;
  for (unsigned j = lane; j < c; j += kWarp)
    store(dxr, j, layer_norm_dx_element(load(xr, j), load(dyr, j), w[j], mean, rstd, s));
}

// kernels/causal_attention.cuh's causal_softmax_row over a warp. In place is
// fine: each lane reads then writes only its own columns.
__global__ void causal_softmax_forward_kernel(const float* s, float* p, std::size_t rows,
                                              unsigned t) {
  const std::size_t row = warp_row();
  const unsigned lane = warp_lane();
  if (row >= rows) return;
  const unsigned i = static_cast<unsigned>(row % t);
  const float* sr = s + row * t;
  float* pr = p + row * t;
  float m = -INFINITY;
  for (unsigned j = lane; j <= i; j += kWarp) m = fmaxf(m, sr[j]);
  m = warp_max(m);
  float sum = 0.0f;
  for (unsigned j = lane; j <= i; j += kWarp) sum += expf(sr[j] - m);
  const float inv = 1.0f / warp_sum(sum);
  for (unsigned j = lane; j < t; j += kWarp) pr[j] = j <= i ? expf(sr[j] - m) * inv : 0.0f;
}

// causal_softmax_row_backward over a warp: ds = scale p (dp - sum p dp).
__global__ void causal_softmax_backward_kernel(const float* p, const float* dp, float* ds,
                                               std::size_t rows, unsigned t, float scale) {
  const std::size_t row = warp_row();
  const unsigned lane = warp_lane();
  if (row >= rows) return;
  const unsigned i = static_cast<unsigned>(row % t);
  const float* pr = p + row * t;
  const float* dpr = dp + row * t;
  float dot = 0.0f;
  for (unsigned j = lane; j <= i; j += kWarp) dot += pr[j] * dpr[j];
  dot = warp_sum(dot);
  float* dsr = ds + row * t;
  for (unsigned j = lane; j < t; j += kWarp)
    dsr[j] = j <= i ? scale * pr[j] * (dpr[j] - dot) : 0.0f;
}

// The sort's layout in the workspace: keys and values in and out, then CUB's
// temporary storage, each 256-byte aligned.
constexpr std::size_t kAlign = 256;
std::size_t aligned(std::size_t bytes) {
  return (bytes + kAlign - 1) / kAlign * kAlign;
}
int key_bits(std::size_t vocab) {
  int bits = 1;
  while ((std::size_t{1} << bits) <= vocab) ++bits;  // vocab itself marks a bad id
  return bits;
}
std::size_t sort_temp_bytes(std::size_t rows, std::size_t vocab) {
  std::size_t bytes = 0;
  RT_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(
      nullptr, bytes, static_cast<const unsigned*>(nullptr), static_cast<unsigned*>(nullptr),
      static_cast<const unsigned*>(nullptr), static_cast<unsigned*>(nullptr),
      static_cast<int>(rows), 0, key_bits(vocab)));
  return bytes;
}

}  // namespace

void token_embedding_forward_cuda(const float* ids, const float* w, std::size_t rows,
                                  std::size_t vocab, std::size_t dim, void* y, DType t,
                                  void* stream) {
  const std::size_t n = rows * dim;
  if (n == 0) return;
  with_storage(t, [&](auto storage) {
    using T = decltype(storage);
    token_embedding_forward_kernel<<<elementwise_blocks(n), kElementwiseThreads, 0,
                                     static_cast<cudaStream_t>(stream)>>>(ids, w, n, vocab, dim,
                                                                          static_cast<T*>(y));
  });
  RT_CUDA_CHECK_LAUNCH();
}

std::size_t token_embedding_backward_workspace_bytes(std::size_t rows, std::size_t vocab) {
  if (rows == 0) return 0;
  return 4 * aligned(rows * sizeof(unsigned)) + aligned(sort_temp_bytes(rows, vocab));
}

void token_embedding_backward_cuda(const float* ids, const void* dy, DType t, std::size_t rows,
                                   std::size_t vocab, std::size_t dim, float* dw, bool accumulate,
                                   void* workspace, std::size_t workspace_bytes, void* stream) {
  const auto s = static_cast<cudaStream_t>(stream);
  if (!accumulate) RT_CUDA_CHECK(cudaMemsetAsync(dw, 0, vocab * dim * sizeof(float), s));
  if (rows == 0 || dim == 0) return;
  RT_CHECK(workspace_bytes >= token_embedding_backward_workspace_bytes(rows, vocab),
           "token_embedding backward: workspace of {} bytes is too small for {} rows",
           workspace_bytes, rows);
  auto* base = static_cast<char*>(workspace);
  const std::size_t slot = aligned(rows * sizeof(unsigned));
  auto* keys_in = reinterpret_cast<unsigned*>(base);
  auto* values_in = reinterpret_cast<unsigned*>(base + slot);
  auto* keys_out = reinterpret_cast<unsigned*>(base + 2 * slot);
  auto* values_out = reinterpret_cast<unsigned*>(base + 3 * slot);
  void* temp = base + 4 * slot;
  std::size_t temp_bytes = workspace_bytes - 4 * slot;
  token_keys_kernel<<<static_cast<unsigned>((rows + kElementwiseThreads - 1) / kElementwiseThreads),
                      kElementwiseThreads, 0, s>>>(ids, rows, vocab, keys_in, values_in);
  RT_CUDA_CHECK_LAUNCH();
  RT_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(temp, temp_bytes, keys_in, keys_out, values_in,
                                                values_out, static_cast<int>(rows), 0,
                                                key_bits(vocab), s));
  const bool vector =
      dim % kVector8 == 0 && vector8_aligned(static_cast<const char*>(dy)) && vector8_aligned(dw);
  with_storage(t, [&](auto storage) {
    using T = decltype(storage);
    if (vector)
      token_gather8_kernel<<<static_cast<unsigned>(rows), kGather8Threads, 0, s>>>(
          keys_out, values_out, static_cast<const T*>(dy), rows, vocab, dim, dw);
    else
      token_gather_kernel<<<static_cast<unsigned>(rows), kGatherThreads, 0, s>>>(
          keys_out, values_out, static_cast<const T*>(dy), rows, vocab, dim, dw);
  });
  RT_CUDA_CHECK_LAUNCH();
}

void add_broadcast_rows_cuda(const float* x, const float* w, float* y, std::size_t batch,
                             std::size_t n, void* stream) {
  const std::size_t total = batch * n;
  if (total == 0) return;
  add_broadcast_rows_kernel<<<elementwise_blocks(total), kElementwiseThreads, 0,
                              static_cast<cudaStream_t>(stream)>>>(x, w, y, total, n);
  RT_CUDA_CHECK_LAUNCH();
}

void layer_norm_forward_cuda(const void* x, DType t, const float* w, const float* b,
                             std::size_t rows, std::size_t c, float eps, void* y, float* mean,
                             float* rstd, void* stream) {
  if (rows == 0) return;
  with_storage(t, [&](auto storage) {
    using T = decltype(storage);
    layer_norm_forward_kernel<<<warp_row_blocks(rows), kRowThreads, 0,
                                static_cast<cudaStream_t>(stream)>>>(
        static_cast<const T*>(x), w, b, rows, static_cast<unsigned>(c), eps, static_cast<T*>(y),
        mean, rstd);
  });
  RT_CUDA_CHECK_LAUNCH();
}

void layer_norm_backward_cuda(const void* x, DType t, const float* w, const void* dy,
                              std::size_t rows, std::size_t c, const float* mean, const float* rstd,
                              void* dx, DType dx_type, void* stream) {
  if (rows == 0 || dx == nullptr) return;
  with_storage_pair(t, dx_type, [&](auto storage, auto dx_storage) {
    using T = decltype(storage);
    using D = decltype(dx_storage);
    layer_norm_backward_kernel<<<warp_row_blocks(rows), kRowThreads, 0,
                                 static_cast<cudaStream_t>(stream)>>>(
        static_cast<const T*>(x), w, static_cast<const T*>(dy), rows, static_cast<unsigned>(c),
        mean, rstd, static_cast<D*>(dx));
  });
  RT_CUDA_CHECK_LAUNCH();
}

void causal_softmax_forward_cuda(const float* s, float* p, std::size_t matrices, std::size_t t,
                                 void* stream) {
  const std::size_t rows = matrices * t;
  if (rows == 0) return;
  causal_softmax_forward_kernel<<<warp_row_blocks(rows), kRowThreads, 0,
                                  static_cast<cudaStream_t>(stream)>>>(s, p, rows,
                                                                       static_cast<unsigned>(t));
  RT_CUDA_CHECK_LAUNCH();
}

void causal_softmax_backward_cuda(const float* p, const float* dp, float* ds, std::size_t matrices,
                                  std::size_t t, float scale, void* stream) {
  const std::size_t rows = matrices * t;
  if (rows == 0) return;
  causal_softmax_backward_kernel<<<warp_row_blocks(rows), kRowThreads, 0,
                                   static_cast<cudaStream_t>(stream)>>>(
      p, dp, ds, rows, static_cast<unsigned>(t), scale);
  RT_CUDA_CHECK_LAUNCH();
}

}  // namespace ringtrain::kernels
