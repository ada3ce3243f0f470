#include "ringtrain/ops/linear_gelu.h"

#include "ops/gpu_ops.h"
#include "ringtrain/core/check.h"

namespace ringtrain {

bool linear_gelu_forward_stored(const ComputeContext& ctx, BufferView x, BufferView w,
                                const float* b, BufferView pre, BufferView y, std::size_t rows,
                                std::size_t in, std::size_t out) {
  RT_CHECK(ctx.is_cuda() && ctx.precision() != DType::f32,
           "the linear + gelu_tanh epilogue runs on a GPU under bf16/fp16 only");
  RT_CHECK(b != nullptr, "the linear + gelu_tanh epilogue needs the layer's bias");
  RT_CHECK(x.count >= rows * in && w.count >= out * in && pre.count >= rows * out &&
               y.count >= rows * out,
           "the linear + gelu_tanh epilogue of {} rows, {} -> {}: views of {}, {}, {} and {} "
           "values are too short",
           rows, in, out, x.count, w.count, pre.count, y.count);
  if (rows == 0) return true;
  // Row-major y [rows, out] = x [rows, in] Wᵀ, as linear_forward_stored.
  return detail::gpu_lt_gemm_gelu_aux_bias(detail::handles_of(ctx), false, true, rows, out, in, x,
                                           in, w, in, y, out, b, pre, out);
}

std::size_t linear_gelu_refused_shapes(const ComputeContext& ctx) {
  return ctx.is_cuda() ? detail::gpu_lt_gemm_gelu_refused(detail::handles_of(ctx)) : 0;
}

}  // namespace ringtrain
