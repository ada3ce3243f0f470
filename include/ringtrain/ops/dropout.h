// Inverted dropout with a mask that is a pure function of (key, element index)
// (kernels/dropout.cuh): reproducible for a given seed, rank, step and layer,
// identical on CPU and GPU, and recomputed in backward instead of stored.
#pragma once

#include <cstddef>
#include <cstdint>

#include "ringtrain/core/buffer_view.h"
#include "ringtrain/ops/compute_context.h"

namespace ringtrain {

std::uint64_t dropout_mask_key(std::uint64_t seed, std::uint64_t rank, std::uint64_t step,
                               std::uint64_t layer);
// y = x * mask / (1 - p); also the backward (dx = dy * mask / (1 - p)) with the
// same key. p in [0, 1). channels > 0: x is a channels-last activation with
// hw pixels per channel, and each element takes the mask of its NCHW index,
// so both layouts drop the same (n, c, h, w).
void dropout_apply(const ComputeContext& ctx, const float* x, float* y, std::size_t n,
                   std::uint64_t key, float p, std::size_t channels = 0, std::size_t hw = 0);
// The stored form: x of the model's storage dtype (f32, bf16, f16), y of it or
// f32 (a gradient the model sums), the product in fp32 rounded once.
void dropout_apply(const ComputeContext& ctx, BufferView x, BufferView y, std::uint64_t key,
                   float p, std::size_t channels = 0, std::size_t hw = 0);

}  // namespace ringtrain
