// --precision: the numbers a model computes with. fp32 everywhere, or bf16 /
// fp16 storage of the weights the matrix products read, of every activation
// and of every activation gradient, with fp32 accumulation inside each op;
// master weights, weight gradients, BatchNorm statistics, the loss and the
// optimizer stay fp32 (the per-op policy is in docs/precision.md).
//
// Low precision is rounding to the low-precision grid (round to nearest even)
// at the points where a mixed-precision run stores a low-precision tensor, on
// the CPU and on the GPU alike, so both compute the same numbers. On a GPU the
// matrix products and convolutions whose inputs are such stored tensors read
// exact 16-bit copies of them (tensor cores; docs/precision.md).
#pragma once

#include <cstddef>
#include <string_view>

#include "ringtrain/core/buffer_view.h"
#include "ringtrain/core/dtype.h"
#include "ringtrain/ops/compute_context.h"

namespace ringtrain {

// The --precision flag's values name the dtypes the compute path stores:
// "fp32", "bf16", "fp16" (DType::f32, bf16, f16); an Error naming the flag otherwise.
DType parse_precision(std::string_view text);
// The flag's spelling of f32, bf16 or f16; an Error for another dtype.
const char* precision_name(DType p);
constexpr bool is_compute_precision(DType t) {
  return t == DType::f32 || t == DType::bf16 || t == DType::f16;
}

// y[i] = x[i] rounded to the grid of `p` (a copy for fp32); y may be x.
void round_to_precision(const ComputeContext& ctx, float* y, const float* x, std::size_t n,
                        DType p);

// dst = src, element by element, between the storage dtypes (f32, bf16, f16)
// of equal counts on the context's device: narrowing rounds to nearest even
// (kernels/storage.cuh), widening is exact, equal dtypes copy. An Error for
// another dtype, or bf16 <-> f16.
void convert_storage(const ComputeContext& ctx, BufferView dst, BufferView src);

}  // namespace ringtrain
