// The padded copy of kernels/shifted_rows.h: 16-bit values moved as bits
// (nothing is converted), 8 channels at a time in one 16-byte access where 8
// divides the channels and both buffers are 16-byte aligned.
#include <cuda_runtime.h>

#include <cstdint>

#include "core/cuda/check_cuda.h"
#include "kernels/launch_shape.cuh"
#include "kernels/shifted_rows.h"

namespace ringtrain::kernels {

namespace {

// Each thread moves one group of `Word`s: a row's `groups` groups side by
// side, so that a warp reads and writes contiguous runs. Index and Divide:
// 32-bit indices and FastDivide where the elements fit, else size_t.
template <typename Word, typename Index, typename Divide>
__global__ void pad_rows_kernel(const Word* __restrict__ src, Word* __restrict__ dst, PaddedRows g,
                                Index total, Divide by_groups, Divide by_grid, Divide by_wp,
                                std::size_t groups) {
  for (Index e = blockIdx.x * blockDim.x + threadIdx.x; e < total;
       e += static_cast<Index>(gridDim.x) * blockDim.x) {
    const auto t = static_cast<Index>(by_groups.divide(e));
    const auto k = static_cast<std::size_t>(e - t * static_cast<Index>(groups));
    const std::size_t from = padded_row_source(g, t, by_grid, by_wp);
    dst[e] = from == kNoPixel ? Word{} : src[from * groups + k];
  }
}

template <typename Word>
void launch(const void* src, void* dst, const PaddedRows& g, std::size_t groups, cudaStream_t s) {
  const std::size_t n = g.rows() * groups;
  const auto* from = static_cast<const Word*>(src);
  auto* to = static_cast<Word*>(dst);
  // The grid-stride index reaches n plus the grid's size: 32 bits where that fits.
  if (n + std::size_t{elementwise_blocks(n)} * kElementwiseThreads <= 0xFFFFFFFFu)
    pad_rows_kernel<<<elementwise_blocks(n), kElementwiseThreads, 0, s>>>(
        from, to, g, static_cast<std::uint32_t>(n), FastDivide(static_cast<std::uint32_t>(groups)),
        FastDivide(static_cast<std::uint32_t>(g.hp * g.wp)),
        FastDivide(static_cast<std::uint32_t>(g.wp)), groups);
  else
    pad_rows_kernel<<<elementwise_blocks(n), kElementwiseThreads, 0, s>>>(
        from, to, g, n, PlainDivide{groups}, PlainDivide{g.hp * g.wp}, PlainDivide{g.wp}, groups);
}

}  // namespace

void pad_rows_cuda(const void* src, void* dst, const PaddedRows& g, std::size_t channels,
                   void* stream) {
  if (g.rows() == 0 || channels == 0) return;
  const auto s = static_cast<cudaStream_t>(stream);
  const bool wide = channels % 8 == 0 && reinterpret_cast<std::uintptr_t>(src) % 16 == 0 &&
                    reinterpret_cast<std::uintptr_t>(dst) % 16 == 0;
  if (wide)
    launch<uint4>(src, dst, g, channels / 8, s);
  else
    launch<std::uint16_t>(src, dst, g, channels, s);
  RT_CUDA_CHECK_LAUNCH();
}

}  // namespace ringtrain::kernels
