// The unfolding of kernels/unfolded_taps.h: 16-bit values moved as bits,
// a thread per group of a tap's channels (8 in one 16-byte access where 8
// divides the channels and the row length and both buffers are 16-byte
// aligned, else one), a warp's threads side by side along a row.
#include <cuda_runtime.h>

#include <cstdint>

#include "core/cuda/check_cuda.h"
#include "kernels/launch_shape.cuh"
#include "kernels/unfolded_taps.h"

namespace ringtrain::kernels {

namespace {

// Element e = (t * taps + tap) * groups + k: group k of tap `tap` of row t.
template <typename Word, typename Index, typename Divide>
__global__ void unfold_taps_kernel(const Word* __restrict__ src, Word* __restrict__ dst,
                                   UnfoldedTaps g, Index total, std::size_t groups,
                                   std::size_t ld_words, Divide by_groups, Divide by_taps,
                                   Divide by_pq, Divide by_q, Divide by_s) {
  const auto taps = static_cast<Index>(g.taps());
  for (Index e = blockIdx.x * blockDim.x + threadIdx.x; e < total;
       e += static_cast<Index>(gridDim.x) * blockDim.x) {
    const auto cell = static_cast<Index>(by_groups.divide(e));
    const auto k = static_cast<std::size_t>(e - cell * static_cast<Index>(groups));
    const auto t = static_cast<Index>(by_taps.divide(cell));
    const auto tap = static_cast<Index>(cell - t * taps);
    const std::size_t from = unfolded_source(g, t, tap, by_pq, by_q, by_s);
    dst[std::size_t{t} * ld_words + std::size_t{tap} * groups + k] =
        from == kNoPixel ? Word{} : src[from * groups + k];
  }
}

template <typename Word>
void launch(const void* src, void* dst, const UnfoldedTaps& g, std::size_t groups,
            std::size_t ld_words, cudaStream_t s) {
  const std::size_t n = g.rows() * g.taps() * groups;
  const auto* from = static_cast<const Word*>(src);
  auto* to = static_cast<Word*>(dst);
  const auto fast = [](std::size_t d) { return FastDivide(static_cast<std::uint32_t>(d)); };
  // The grid-stride index reaches n plus the grid's size: 32 bits where that fits.
  if (n + std::size_t{elementwise_blocks(n)} * kElementwiseThreads <= 0xFFFFFFFFu)
    unfold_taps_kernel<<<elementwise_blocks(n), kElementwiseThreads, 0, s>>>(
        from, to, g, static_cast<std::uint32_t>(n), groups, ld_words, fast(groups), fast(g.taps()),
        fast(g.p * g.q), fast(g.q), fast(g.s));
  else
    unfold_taps_kernel<<<elementwise_blocks(n), kElementwiseThreads, 0, s>>>(
        from, to, g, n, groups, ld_words, PlainDivide{groups}, PlainDivide{g.taps()},
        PlainDivide{g.p * g.q}, PlainDivide{g.q}, PlainDivide{g.s});
}

}  // namespace

void unfold_taps_cuda(const void* src, void* dst, const UnfoldedTaps& g, void* stream) {
  if (g.rows() == 0 || g.c == 0 || g.taps() == 0) return;
  const auto s = static_cast<cudaStream_t>(stream);
  const bool wide = g.c % 8 == 0 && g.ld % 8 == 0 &&
                    reinterpret_cast<std::uintptr_t>(src) % 16 == 0 &&
                    reinterpret_cast<std::uintptr_t>(dst) % 16 == 0;
  if (wide)
    launch<uint4>(src, dst, g, g.c / 8, g.ld / 8, s);
  else
    launch<std::uint16_t>(src, dst, g, g.c, g.ld, s);
  RT_CUDA_CHECK_LAUNCH();
}

}  // namespace ringtrain::kernels
