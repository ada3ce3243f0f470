// A linear layer's product followed by gelu_tanh, in one cuBLASLt GEMM
// (GPT-2's MLP: c_fc -> gelu): its GELU_AUX_BIAS epilogue adds the fp32 bias
// to the fp32 sum, stores that pre-activation rounded once to 16 bits (the
// auxiliary, which gelu's backward reads), and stores gelu_tanh of the
// unrounded fp32 value rounded once. The unfused pair rounds the
// pre-activation and then takes gelu of the rounded value: under bf16/fp16
// the output is not the unfused pair's bits (pre is), so the model plans
// this fusion only where it is asked to (model/fused_linear_gelu.h). Its CPU
// twin is the linear layer's fp32 product and gelu_tanh_forward_with_aux
// (ops/activation.h).
#pragma once

#include <cstddef>

#include "ringtrain/core/buffer_view.h"
#include "ringtrain/ops/compute_context.h"

namespace ringtrain {

// pre = round16(x Wᵀ + b) and y = round16(gelu_tanh(x Wᵀ + b)), x [rows, in],
// W [out, in] (the layer's 16-bit copy), pre and y [rows, out], all of the
// context's 16-bit dtype, b [out] fp32: on a GPU under bf16/fp16 only (an
// Error elsewhere). Returns false, having queued nothing, where cuBLASLt
// refuses the GELU epilogue for this shape (or out is not a multiple of 8,
// which its auxiliary's leading dimension must be): the caller then runs
// linear_forward_stored and gelu_tanh_forward, the unfused pair's numbers.
bool linear_gelu_forward_stored(const ComputeContext& ctx, BufferView x, BufferView w,
                                const float* b, BufferView pre, BufferView y, std::size_t rows,
                                std::size_t in, std::size_t out);

// How many product shapes of the context had cuBLASLt's GELU epilogue
// refused (each then ran as the unfused pair), for the kernels column; 0 on
// the CPU.
std::size_t linear_gelu_refused_shapes(const ComputeContext& ctx);

}  // namespace ringtrain
