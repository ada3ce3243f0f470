// The ops that join and fork activations in a model graph: copies, scaled
// sums (residual adds, the gradient of a node read several times) and strided
// block copies (concatenation along channels). All run on the context's device
// in stream order.
#pragma once

#include <cstddef>
#include <span>

#include "ringtrain/core/buffer_view.h"
#include "ringtrain/ops/compute_context.h"

namespace ringtrain {

// y = x
void copy_floats(const ComputeContext& ctx, float* y, const float* x, std::size_t n);
// y += a x
void add_scaled(const ComputeContext& ctx, float* y, const float* x, float a, std::size_t n);
// y = x0 + a x1 as the model stores it (on the context's 16-bit grid under
// bf16/fp16): add_scaled's arithmetic, and the rounding, in one pass.
void sum_two_stored(const ComputeContext& ctx, float* y, const float* x0, const float* x1, float a,
                    std::size_t n);
// The stored forms, on views of the model's storage dtype (f32, bf16, f16),
// computed in fp32 and rounded once: y = x0 + a x1 (all of one dtype; y may
// be x0), and
// y = a x converted to y's dtype (an add's gradient).
void sum_two_stored(const ComputeContext& ctx, BufferView y, BufferView x0, BufferView x1, float a);
void scale_stored(const ComputeContext& ctx, BufferView y, BufferView x, float a);
// y (fp32) += x, x of any storage dtype widened (exact): a contribution that
// a layer wrote in 16 bits, added into an fp32 sum in the pass that widens it
// (add_scaled's arithmetic with a = 1 on the widened values: the same bits).
void add_widened(const ComputeContext& ctx, BufferView y, BufferView x);
// The most terms narrow_sum takes in one pass.
constexpr std::size_t kNarrowSumMaxTerms = 4;
// narrowed (bf16 or fp16) = sum (fp32) + terms[0] + terms[1] + ..., added in
// that order in fp32 (each term widened: add_widened's and add_scaled's
// arithmetic) and rounded once; sum is read, not written. The bits of adding
// each term into sum, then convert_storage, in one pass where those took one
// per term and one more: the contributions to an fp32 gradient sum wait in
// their scratch until its reader narrows it (an Inception block's input
// gradient, 3 or 4 branches). 1 to kNarrowSumMaxTerms terms, of one dtype,
// each of sum's count; an Error otherwise.
void narrow_sum(const ComputeContext& ctx, BufferView narrowed, BufferView sum,
                std::span<const BufferView> terms);
// y = 0, any dtype, in the context's stream order.
void zero_stored(const ComputeContext& ctx, BufferView y);
// x *= a
void scale_floats(const ComputeContext& ctx, float* x, std::size_t n, float a);
// The stored form, on views of the storage dtypes (f32, bf16, f16), pitches
// and width in elements: a byte copy where the dtypes agree, else each
// element converted (a concat's gradient into an fp32 sum). A view on a
// CUDA device is device memory: narrow rows between two such views go by a
// kernel (kernels/pitched_copy.cuh), not the runtime's pitched copy.
void copy_blocks(const ComputeContext& ctx, BufferView dst, std::size_t dst_pitch, BufferView src,
                 std::size_t src_pitch, std::size_t width, std::size_t rows);
// rows blocks of `width` floats: dst[r * dst_pitch + i] = src[r * src_pitch + i]
void copy_blocks(const ComputeContext& ctx, float* dst, std::size_t dst_pitch, const float* src,
                 std::size_t src_pitch, std::size_t width, std::size_t rows);

}  // namespace ringtrain
