// The layout kernels: a tiled batched transpose (through shared memory, so
// that both the reads and the writes are coalesced; a line per thread where
// one side is short) and the channels-last global average pool.
#include <algorithm>

#include "core/cuda/check_cuda.h"
#include "kernels/launch_shape.cuh"
#include "kernels/layout.cuh"
#include "kernels/layout.h"
#include "kernels/storage.cuh"
#include "kernels/vector8.cuh"

namespace ringtrain::kernels {

namespace {

constexpr unsigned kTile = 32, kTileRows = 8;
// Up to this many rows (or columns) a tile of 32 would stand mostly idle: a
// thread per line of the other side instead.
constexpr std::size_t kFewLines = 16;

// x and y of storage types T and D (a 16-bit activation, or a 16-bit gradient
// into an fp32 sum): widened into the tile, narrowed (if at all) as stored.
template <typename T, typename D>
__global__ void transpose_batched_kernel(const T* __restrict__ x, D* __restrict__ y,
                                         std::size_t batch, std::size_t rows, std::size_t cols) {
  // +1: the column reads of the tile fall in different shared-memory banks.
  __shared__ float tile[kTile][kTile + 1];
  const std::size_t r0 = static_cast<std::size_t>(blockIdx.y) * kTile;
  const std::size_t c0 = static_cast<std::size_t>(blockIdx.x) * kTile;
  for (std::size_t n = blockIdx.z; n < batch; n += gridDim.z) {
    const T* xn = x + n * rows * cols;
    for (unsigned k = threadIdx.y; k < kTile; k += kTileRows) {
      const std::size_t i = r0 + k, j = c0 + threadIdx.x;
      if (i < rows && j < cols) tile[k][threadIdx.x] = load(xn, i * cols + j);
    }
    __syncthreads();
    for (unsigned k = threadIdx.y; k < kTile; k += kTileRows) {
      const std::size_t j = c0 + k, i = r0 + threadIdx.x;
      if (i < rows && j < cols)
        store(y, transposed_index(n, i, j, rows, cols), tile[threadIdx.x][k]);
    }
    __syncthreads();
  }
}

// One row or one column: the transpose moves nothing (a 1x1 filter's
// [K, C, 1, 1] is its [K, 1, 1, C]), so a copy, converted as stored, where a
// tile would hold one line of 32.
template <typename T, typename D>
__global__ void convert_kernel(const T* __restrict__ x, D* __restrict__ y, std::size_t n) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x)
    store(y, i, load(x, i));
}

// Few rows (kFewLines or less: an image's 3 channels into channels-last): a
// thread per column of a sample reads its rows' elements, each
// row's reads coalesced across the warp, and writes them side by side, the
// warp's writes one contiguous run. A tile would use 3 of its 32 rows.
template <typename T, typename D>
__global__ void transpose_few_rows_kernel(const T* __restrict__ x, D* __restrict__ y,
                                          std::size_t batch, std::size_t rows, std::size_t cols) {
  const std::size_t total = batch * cols;
  for (std::size_t q = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; q < total;
       q += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    const std::size_t n = q / cols, j = q % cols;
    for (std::size_t i = 0; i < rows; ++i)
      store(y, transposed_index(n, i, j, rows, cols), load(x, (n * rows + i) * cols + j));
  }
}

// Few columns (a 3x3 filter's 9 taps into [K, R, S, C]): a thread per row of
// a sample writes its columns' elements, each column's writes coalesced
// across the warp; its reads are a contiguous run of the warp's rows.
template <typename T, typename D>
__global__ void transpose_few_cols_kernel(const T* __restrict__ x, D* __restrict__ y,
                                          std::size_t batch, std::size_t rows, std::size_t cols) {
  const std::size_t total = batch * rows;
  for (std::size_t q = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; q < total;
       q += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    const std::size_t n = q / rows, i = q % rows;
    for (std::size_t j = 0; j < cols; ++j)
      store(y, transposed_index(n, i, j, rows, cols), load(x, q * cols + j));
  }
}

template <typename T>
__global__ void gap_nhwc_forward_kernel(const T* __restrict__ x, T* __restrict__ y,
                                        std::size_t batch, std::size_t channels, std::size_t hw) {
  const std::size_t planes = batch * channels;
  for (std::size_t q = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; q < planes;
       q += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    const std::size_t n = q / channels, c = q % channels;
    float acc = 0.0f;
    for (std::size_t p = 0; p < hw; ++p) acc += load(x, nhwc_index(n, c, p, channels, hw));
    store(y, q, acc / static_cast<float>(hw));
  }
}

template <typename T, typename D>
__global__ void gap_nhwc_backward_kernel(const T* __restrict__ dy, D* __restrict__ dx,
                                         std::size_t batch, std::size_t channels, std::size_t hw) {
  const std::size_t total = batch * hw * channels;
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x)
    store(dx, i,
          load(dy, (i / (hw * channels)) * channels + i % channels) / static_cast<float>(hw));
}

// The same 8 channels a thread (16-byte accesses), where 8 divides C and both
// buffers are 16-byte aligned: one division per 8 values, where each value
// took two 64-bit ones (resnet50 b256: 25.7 M values), and the same quotient
// per value.
template <typename T, typename D>
__global__ void gap_nhwc_backward8_kernel(const T* __restrict__ dy, D* __restrict__ dx,
                                          std::size_t batch, std::size_t channels, std::size_t hw) {
  const std::size_t groups = channels / kVector8, per_sample = hw * groups;
  const std::size_t vectors = batch * per_sample;
  for (std::size_t v = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; v < vectors;
       v += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    const std::size_t n = v / per_sample, g = (v - n * per_sample) % groups;
    float u[kVector8];
    load8(dy, n * channels + g * kVector8, u);
#pragma unroll
    for (unsigned k = 0; k < kVector8; ++k) u[k] = u[k] / static_cast<float>(hw);
    store8(dx, v * kVector8, u);
  }
}

}  // namespace

void transpose_batched_cuda(const void* x, DType x_type, void* y, DType y_type, std::size_t batch,
                            std::size_t rows, std::size_t cols, void* stream) {
  if (batch == 0 || rows == 0 || cols == 0) return;
  const auto s = static_cast<cudaStream_t>(stream);
  // Every form moves each element once, converted as stored: the same bits.
  with_storage_pair(x_type, y_type, [&](auto t, auto d) {
    using T = decltype(t);
    using D = decltype(d);
    const auto* xs = static_cast<const T*>(x);
    auto* ys = static_cast<D*>(y);
    if (rows == 1 || cols == 1) {
      const std::size_t n = batch * rows * cols;
      convert_kernel<<<elementwise_blocks(n), kElementwiseThreads, 0, s>>>(xs, ys, n);
    } else if (rows <= kFewLines) {
      transpose_few_rows_kernel<<<elementwise_blocks(batch * cols), kElementwiseThreads, 0, s>>>(
          xs, ys, batch, rows, cols);
    } else if (cols <= kFewLines) {
      transpose_few_cols_kernel<<<elementwise_blocks(batch * rows), kElementwiseThreads, 0, s>>>(
          xs, ys, batch, rows, cols);
    } else {
      const dim3 grid(static_cast<unsigned>((cols + kTile - 1) / kTile),
                      static_cast<unsigned>((rows + kTile - 1) / kTile),
                      static_cast<unsigned>(std::min<std::size_t>(batch, 65535)));
      transpose_batched_kernel<<<grid, dim3(kTile, kTileRows), 0, s>>>(xs, ys, batch, rows, cols);
    }
  });
  RT_CUDA_CHECK_LAUNCH();
}

void global_avg_pool_nhwc_forward_cuda(const void* x, void* y, DType t, std::size_t batch,
                                       std::size_t channels, std::size_t hw, void* stream) {
  const std::size_t planes = batch * channels;
  if (planes == 0) return;
  with_storage(t, [&](auto storage) {
    using T = decltype(storage);
    gap_nhwc_forward_kernel<<<elementwise_blocks(planes), kElementwiseThreads, 0,
                              static_cast<cudaStream_t>(stream)>>>(
        static_cast<const T*>(x), static_cast<T*>(y), batch, channels, hw);
  });
  RT_CUDA_CHECK_LAUNCH();
}

void global_avg_pool_nhwc_backward_cuda(const void* dy, DType t, void* dx, DType dx_type,
                                        std::size_t batch, std::size_t channels, std::size_t hw,
                                        void* stream) {
  const std::size_t total = batch * channels * hw;
  if (total == 0) return;
  with_storage_pair(t, dx_type, [&](auto storage, auto dx_storage) {
    using T = decltype(storage);
    using D = decltype(dx_storage);
    const auto* in = static_cast<const T*>(dy);
    auto* out = static_cast<D*>(dx);
    if (channels % kVector8 == 0 && vector8_aligned(in) && vector8_aligned(out))
      gap_nhwc_backward8_kernel<<<elementwise_blocks(total / kVector8), kElementwiseThreads, 0,
                                  static_cast<cudaStream_t>(stream)>>>(in, out, batch, channels,
                                                                       hw);
    else
      gap_nhwc_backward_kernel<<<elementwise_blocks(total), kElementwiseThreads, 0,
                                 static_cast<cudaStream_t>(stream)>>>(in, out, batch, channels, hw);
  });
  RT_CUDA_CHECK_LAUNCH();
}

}  // namespace ringtrain::kernels
