#include "model/fused_linear_gelu.h"

#include <fmt/format.h>

#include "ringtrain/core/check.h"
#include "ringtrain/ops/activation.h"
#include "ringtrain/ops/linear_gelu.h"
#include "ringtrain/ops/precision.h"

namespace ringtrain {

FusedLinearGelu::FusedLinearGelu(LinearLayer& linear, StoresActivations& gelu,
                                 const ComputeContext& ctx, std::vector<std::string> folded,
                                 std::shared_ptr<LayerWorkspace> workspace)
    : linear_(linear),
      gelu_(gelu),
      ctx_(ctx),
      folded_(std::move(folded)),
      workspace_(std::move(workspace)) {
  RT_CHECK(ctx_.is_cuda() ? linear_.stores_activations() : workspace_ != nullptr,
           "fused {}: the GPU form needs the linear layer's stored path, the CPU twin a workspace",
           fmt::join(folded_, "+"));
}

std::size_t FusedLinearGelu::workspace_floats(const LinearLayer& linear) {
  return linear.input_shape().numel() + linear.output_shape().numel();
}

void FusedLinearGelu::forward(BufferView x, BufferView pre, BufferView y, std::size_t batch,
                              bool training) {
  if (ctx_.is_cuda()) {
    if (linear_.forward_stored_gelu(x, pre, y, batch)) {
      last_ = Ran::epilogue;
      return;
    }
    gelu_input_.assign(1, pre);  // no allocation after the first
    gelu_.forward_stored(gelu_input_, y, batch, training);
    last_ = Ran::unfused;
    return;
  }
  // The CPU twin: the linear layer's own fp32 product and bias (what the
  // model's adapter runs for the unfused linear), on x widened as the adapter
  // widens it, then the epilogue's arithmetic on the fp32 sum.
  float* ws = workspace_->get(batch, folded_.back());
  const std::size_t nx = batch * linear_.input_shape().numel();
  const float* wide_x = x.as<const float>();
  if (x.dtype != DType::f32) {
    convert_storage(ctx_, view_of(ws, nx, ctx_.device()), x);
    wide_x = ws;
  }
  // Under fp32 the sum goes straight into pre, as the adapter writes it.
  float* sum = pre.dtype == DType::f32 ? pre.as<float>() : ws + nx;
  linear_.forward(wide_x, sum, batch, training);
  gelu_tanh_forward_with_aux(ctx_, sum, pre, y);
}

std::string FusedLinearGelu::describe_kernels() const {
  const std::string head = fmt::format("fused {}: ", fmt::join(folded_, "+"));
  const std::string backward =
      backward_by_.empty()
          ? std::string("gelu's, then the linear's")
          : fmt::format("fused into {}'s dx (DGELU_BGRAD), then the linear's", backward_by_);
  if (!ctx_.is_cuda())
    return head +
           "CPU twin of cuBLASLt's GELU_AUX_BIAS epilogue (fp32 x Wᵀ + b; the pre-activation "
           "and gelu_tanh of it each rounded once); backward: " +
           backward;
  const std::string_view p = dtype_name(ctx_.precision());
  std::string s = fmt::format(
      "{}cublasLt GELU_AUX_BIAS epilogue: {} y = gelu_tanh(x Wᵀ + b), the pre-activation "
      "stored as its auxiliary; backward: {}",
      head, p, backward);
  if (last_ == Ran::epilogue) s += "; last forward: the epilogue ran";
  if (last_ == Ran::unfused)
    s += "; last forward: cuBLASLt refused the GELU epilogue for this shape, the unfused pair "
         "ran (bias epilogue, then gelu)";
  if (const std::size_t refused = linear_gelu_refused_shapes(ctx_); refused > 0)
    s += fmt::format("; {} shape(s) of this context refused", refused);
  return s;
}

}  // namespace ringtrain
