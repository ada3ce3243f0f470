// Per-channel bias over an activation laid out [outer, channels, inner]:
// Linear has inner = 1, Conv2d has inner = H*W (NCHW).
#pragma once

#include <cstddef>

#include "ringtrain/ops/compute_context.h"

namespace ringtrain {

// y[o, c, i] += bias[c]
void bias_add(const ComputeContext& ctx, float* y, const float* bias, std::size_t outer,
              std::size_t channels, std::size_t inner);
// dbias[c] = (accumulate ? dbias[c] : 0) + sum over o, i of dy[o, c, i]
void bias_grad(const ComputeContext& ctx, const float* dy, float* dbias, std::size_t outer,
               std::size_t channels, std::size_t inner, bool accumulate);

}  // namespace ringtrain
