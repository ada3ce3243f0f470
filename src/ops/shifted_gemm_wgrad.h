// A stride-1, channels-last convolution's weight gradient as plain GEMMs: a
// cuDNN-free path whose arithmetic is a deterministic fp32 sum of exact
// products of the 16-bit x and dy, which a plan times beside the graph
// engines (ops/cuda/gpu_conv_plan.cpp).
//
// dW[k, r, s, c] = sum over n, p, q of dy[n, p, q, k] x[n, p + r - pad_h,
// q + s - pad_w, c]. With x copied into a zero grid of hp x wp per image (hp
// = h + 2 pad_h, wp = w + 2 pad_w) and dy into the same grid (its p x q
// pixels at the top left, zeros after), grid row t of dy meets grid row
// t + r wp + s of x in every term of tap (r, s), so each tap is one GEMM
// over the grid's rows: dW[:, r, s, :] = dyᵀ x shifted, m = K, n = C, k =
// the rows. The rows of dy's padding are zero, so what x's shifted rows hold
// there (another image's pixels, the tail's zeros) adds nothing. A 1x1
// filter without padding needs no copy: dy and x are read in place, one
// GEMM. Larger batches go through the copies in chunks of images, each
// chunk's GEMMs adding into dW after the first (a fixed order: the same bits
// every run).
#pragma once

#include <cstddef>
#include <optional>
#include <string>

#include "kernels/shifted_rows.cuh"
#include "ops/cudnn_graph.h"

namespace ringtrain::detail {

struct ShiftedWgradPlan {
  bool in_place = false;  // a 1x1 filter without padding: no copies, one GEMM
  std::size_t images_per_chunk = 0, chunks = 0;
  // Where a chunk of images goes: x's grid (its tail covers the last rows'
  // largest shift) and dy's (no tail), each of the chunk's images.
  kernels::PaddedRows x_grid, dy_grid;
  // The copies' bytes: x's grid first, dy's from dy_offset (256-aligned).
  std::size_t dy_offset = 0, workspace_bytes = 0;
  // The shift of tap (r, s), in rows of x's grid (its [K, C] block of a
  // [K, R, S, C] dW starts at (r S + s) C).
  std::size_t row_shift(std::size_t r, std::size_t s) const { return r * x_grid.wp + s; }
};

// Most bytes a plan's copies take (x's and dy's grids of a chunk of images),
// unless one image needs more: a few large chunks (few launches), or chunks
// whose grids stay in a current GPU's L2 cache while the taps re-read them
// shifted (9 reads of x's grid for a 3x3 filter, one from memory). Which is
// faster depends on the shape and the GPU: a plan times both.
constexpr std::size_t kShiftedWgradWorkspaceCap = std::size_t{256} << 20;
constexpr std::size_t kShiftedWgradCacheCap = std::size_t{32} << 20;

// The plan of `shape`'s weight gradient within `workspace_cap` bytes of
// copies; nullopt where the GEMMs do not apply (a stride other than 1, NCHW
// memory, inconsistent extents), and *why_not says why.
std::optional<ShiftedWgradPlan> plan_shifted_wgrad(const ConvGraphShape& shape,
                                                   std::size_t workspace_cap, std::string* why_not);

// The images [first, first + count) of the chunk that `chunk` is.
struct ChunkImages {
  std::size_t first = 0, count = 0;
};
ChunkImages chunk_images(const ShiftedWgradPlan& plan, const ConvGraphShape& shape,
                         std::size_t chunk);

// The CPU twin of the GPU's sequence, on values given as floats (16-bit
// values widened): the copies through kernels/shifted_rows.cuh, then each
// chunk's taps as the GEMMs compute them (fp32 sums over the rows in order),
// dW [K, R, S, C] overwritten. For tests: it checks the rows' arithmetic, and
// dW against a direct sum.
void shifted_wgrad_cpu(const ConvGraphShape& shape, const ShiftedWgradPlan& plan, const float* x,
                       const float* dy, float* dw_krsc);

}  // namespace ringtrain::detail
