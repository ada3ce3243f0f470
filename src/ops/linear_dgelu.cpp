#include "ringtrain/ops/linear_dgelu.h"

#include "ops/gpu_ops.h"
#include "ringtrain/core/check.h"
#include "ringtrain/ops/activation.h"
#include "ringtrain/ops/bias.h"
#include "ringtrain/tensor/device_memory.h"

namespace ringtrain {

LinearDgeluRan linear_dgelu_backward_stored(const ComputeContext& ctx, BufferView dy, BufferView w,
                                            BufferView pre, BufferView d_pre, float* pre_db,
                                            std::size_t rows, std::size_t in, std::size_t out,
                                            bool accumulate) {
  RT_CHECK(ctx.is_cuda() && ctx.precision() != DType::f32,
           "the linear's dx with gelu_tanh's backward runs on a GPU under bf16/fp16 only");
  RT_CHECK(dy.count >= rows * out && w.count >= out * in && pre.count >= rows * in &&
               d_pre.count >= rows * in,
           "the DGELU epilogue of {} rows, {} -> {}: views of {}, {}, {} and {} values are too "
           "short",
           rows, out, in, dy.count, w.count, pre.count, d_pre.count);
  if (rows == 0 || in == 0) {
    if (pre_db != nullptr && !accumulate) device_zero(pre_db, in * sizeof(float), ctx.device());
    return LinearDgeluRan::dgelu_bgrad;
  }
  RT_CHECK(out > 0, "the DGELU epilogue of {} rows, {} -> {}: no inner dimension", rows, out, in);
  // Row-major dx [rows, in] = dy [rows, out] W [out, in], as
  // linear_backward_stored's dx; the auxiliary laid out as dx.
  return detail::gpu_lt_gemm_dgelu(detail::handles_of(ctx), false, false, rows, in, out, dy, out, w,
                                   in, d_pre, in, pre, in, pre_db, accumulate);
}

void linear_dgelu_twin(const ComputeContext& ctx, float* dx, BufferView pre, BufferView d_pre,
                       float* pre_db, std::size_t rows, std::size_t width, bool accumulate) {
  RT_CHECK(!ctx.is_cuda(), "linear_dgelu_twin is the CPU twin of cuBLASLt's DGELU_BGRAD epilogue");
  RT_CHECK(pre.count == rows * width && d_pre.count == rows * width,
           "linear_dgelu_twin: {} x {} values, views of {} and {}", rows, width, pre.count,
           d_pre.count);
  gelu_tanh_backward_of_sum(ctx, pre, dx, d_pre);
  if (pre_db != nullptr)
    bias_grad(ctx, view_of(dx, rows * width, ctx.device()), pre_db, rows, width, 1, accumulate);
}

std::size_t linear_dgelu_bgrad_refused_shapes(const ComputeContext& ctx) {
  return ctx.is_cuda() ? detail::gpu_lt_gemm_dgelu_bgrad_refused(detail::handles_of(ctx)) : 0;
}

std::size_t linear_dgelu_refused_shapes(const ComputeContext& ctx) {
  return ctx.is_cuda() ? detail::gpu_lt_gemm_dgelu_refused(detail::handles_of(ctx)) : 0;
}

}  // namespace ringtrain
