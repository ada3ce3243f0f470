// A channels-last convolution's weight gradient as one GEMM over unfolded
// input (im2col), at any stride: the only GEMM form for a strided one, and
// at stride 1 timed beside the shifted rows (ops/shifted_gemm_wgrad.h; which
// goes first: ops/gemm_wgrad_forms.h). A plan times it beside cuDNN's graph
// engines (ops/cuda/gpu_conv_plan.cpp).
//
// dW[k, (r, s, c)] = sum over rows t = (n, p, q) of dy[t, k] u[t, (r, s, c)],
// u the unfolded input: row t holds the R x S x C input values output (p, q)
// reads (zeros for the padding). So dW [K, R, S, C] = dyᵀ u, m = K, n = R S
// C, k = the rows, dy read in place, u built in chunks of images, each
// chunk's GEMM adding into dW after the first (a fixed order: the same bits
// every run). Where the filter covers few input channels (a ResNet's 7x7
// stem or VGG's first 3x3 convolution, on 3 channels), this is what keeps
// the weight gradient off a 16-bit x and dy widened to fp32 and a large
// legacy workspace.
#pragma once

#include <cstddef>
#include <optional>
#include <string>

#include "kernels/unfolded_taps.cuh"
#include "ops/cudnn_graph.h"

namespace ringtrain::detail {

struct UnfoldedWgradPlan {
  std::size_t images_per_chunk = 0, chunks = 0;
  // A chunk's unfolded rows (ld: R S C rounded up to 8 values, so that rows
  // start 16-byte aligned).
  kernels::UnfoldedTaps unfolded;
  // dW's rows as the GEMMs write them: R S C floats rounded up to 4, so that
  // every row of D starts 16-byte aligned too (cuBLASLt's alignment covers
  // the leading dimension; a 3x3 filter on 3 channels has rows of 27). Where
  // that rounds up, the GEMMs write a staging copy at dw_offset in the
  // workspace, and one pitched copy puts its rows into dW.
  std::size_t dw_ld = 0, dw_offset = 0;
  std::size_t workspace_bytes = 0;
  bool stages_dw() const { return dw_ld != unfolded.taps() * unfolded.c; }
};

// The plan of `shape`'s weight gradient within `workspace_cap` bytes of
// unfolded rows (one image's at least); nullopt where it does not apply
// (NCHW memory, inconsistent extents), and *why_not says why.
std::optional<UnfoldedWgradPlan> plan_unfolded_wgrad(const ConvGraphShape& shape,
                                                     std::size_t workspace_cap,
                                                     std::string* why_not);

// The CPU twin of the GPU's sequence (values as floats): each chunk unfolded
// through kernels/unfolded_taps.cuh, then its GEMM's fp32 sums over the rows
// in order, added into dW [K, R, S, C] (its rows dw_ld apart, then copied
// into place where the plan stages them) after the first chunk. For tests.
void unfolded_wgrad_cpu(const ConvGraphShape& shape, const UnfoldedWgradPlan& plan, const float* x,
                        const float* dy, float* dw_krsc);

}  // namespace ringtrain::detail
