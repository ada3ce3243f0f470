// The backward of linear -> gelu_tanh -> linear (GPT-2's c_fc -> gelu ->
// c_proj) at the gelu: the second linear's dx GEMM (dx = dy W, [rows, in])
// with cuBLASLt's DGELU_BGRAD epilogue, which multiplies each fp32 element of
// the product by gelu_tanh' of the stored pre-activation (the forward's
// GELU_AUX_BIAS auxiliary, read back as its input), stores that gradient of
// the pre-activation once rounded to 16 bits, and reduces its columns into
// the first linear's fp32 bias gradient. Gelu's backward kernel, the 16-bit
// gradient of gelu's output and the first linear's bias reduction are gone.
//
// The unfused pair rounds the product to 16 bits, then rounds gelu' times it:
// under bf16/fp16 d(pre) is one rounding away from the unfused pair's (the
// forward's fusion is not its bits either), so the model plans this only
// where it plans the forward's (model/fused_linear_dgelu.h). The CPU twin is
// the linear's fp32 dx and gelu_tanh_backward_of_sum (ops/activation.h),
// then bias_grad of the unrounded fp32 values.
#pragma once

#include <cstddef>

#include "ringtrain/core/buffer_view.h"
#include "ringtrain/ops/compute_context.h"

namespace ringtrain {

// What the GPU ran for one call: DGELU_BGRAD (d(pre) and the bias gradient),
// DGELU alone (cuBLASLt refused the fp32 bias gradient with a 16-bit D for
// this shape: the first linear reduces its own), or nothing (refused, or an
// auxiliary outside cublasLt.h's rules: the unfused pair runs).
enum class LinearDgeluRan { refused, dgelu, dgelu_bgrad };

// d_pre = round16(gelu_tanh'(pre) · (dy W)), dy [rows, out], W [out, in]
// (the second linear's 16-bit copy), pre and d_pre [rows, in], all of the
// context's 16-bit dtype; and, where pre_db is not null, pre_db [in] (fp32)
// = the column sums of the unrounded d_pre, overwritten or added to
// (accumulate). On a GPU under bf16/fp16 only (an Error elsewhere). Nothing
// is queued where it returns refused; pre_db is untouched unless it returns
// dgelu_bgrad. rows = 0 writes nothing and returns dgelu_bgrad, its sums
// being empty: pre_db is zeroed (or kept, accumulating).
LinearDgeluRan linear_dgelu_backward_stored(const ComputeContext& ctx, BufferView dy, BufferView w,
                                            BufferView pre, BufferView d_pre, float* pre_db,
                                            std::size_t rows, std::size_t in, std::size_t out,
                                            bool accumulate);

// The CPU twin's step after the second linear's fp32 dx (`dx`, rows x width,
// overwritten with the fp32 d(pre)): d_pre = round(gelu_tanh'(pre) · dx) in
// pre's dtype, and pre_db [width] = bias_grad of the fp32 values (added to
// where accumulate), summed row by row as the linear's own reduction. Under
// fp32 storage that is the unfused pair's bits. CPU contexts only.
void linear_dgelu_twin(const ComputeContext& ctx, float* dx, BufferView pre, BufferView d_pre,
                       float* pre_db, std::size_t rows, std::size_t width, bool accumulate);

// Product shapes of the context where cuBLASLt refused DGELU_BGRAD but ran
// DGELU alone, and where it refused both; 0 on the CPU.
std::size_t linear_dgelu_bgrad_refused_shapes(const ComputeContext& ctx);
std::size_t linear_dgelu_refused_shapes(const ComputeContext& ctx);

}  // namespace ringtrain
