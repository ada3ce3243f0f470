// A weight-gradient candidate's result checked before its timing may choose
// it (gpu_conv_plan.cpp): x and dy hold the trial pattern
// (kernels/trial_pattern.cuh), so a few entries of dW are known in double
// precision without reading x and dy back, and a candidate whose dW differs
// there (a wrong stride, tap, order or chunk: an engine's bug, or one of
// ringtrain's GEMMs) is passed over, with a warning, however fast it ran.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "ops/cudnn_graph.h"
#include "ringtrain/core/dtype.h"

namespace ringtrain::detail {

// The trial pattern's operands: x's and dy's seeds.
inline constexpr std::uint32_t kTrialSeedX = 1;
inline constexpr std::uint32_t kTrialSeedDy = 2;

// dW[k, c, r, s] in double precision from the pattern's x and dy of shape
// `shape` (in its memory order).
struct WgradSpot {
  std::size_t k = 0, c = 0, r = 0, s = 0;
  double sum = 0;
};

// `count` entries: the first and the last of dW, then every tap (r, s) in
// turn (spread over them where there are more taps than entries) with
// channels from a hash: a tap's border rows, where padding meets the
// stride, are where a wrong GEMM goes wrong first.
std::vector<WgradSpot> wgrad_spots(const ConvGraphShape& shape, std::size_t count = 16);

// "" where `dw` (a host copy of a candidate's result, of dtype dw_dtype, in
// [K, C, R, S] or, kcrs false, [K, R, S, C] order) holds the spots' sums, else
// which entry differs, with both values. Each entry may differ from its sum
// by 1e-3 of the spots' root mean square (fp32 accumulation in any order and
// split: the pattern's sums have no cancellation to amplify it), plus one
// rounding of dW's dtype; a wrong result misses by about that root mean
// square. NaN or Inf fails, and so does an empty list of spots.
std::string wgrad_spot_disagreement(const ConvGraphShape& shape, std::span<const WgradSpot> spots,
                                    const void* dw, DType dw_dtype, bool kcrs);

}  // namespace ringtrain::detail
