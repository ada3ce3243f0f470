#include "model/fused_linear_dgelu.h"

#include <fmt/format.h>

#include "ringtrain/core/check.h"

namespace ringtrain {

FusedLinearDgelu::FusedLinearDgelu(LinearLayer& proj, LinearLayer& fc, const ComputeContext& ctx,
                                   std::string gelu_name, std::string fc_name)
    : proj_(proj),
      fc_(fc),
      ctx_(ctx),
      gelu_name_(std::move(gelu_name)),
      fc_name_(std::move(fc_name)) {
  RT_CHECK(!ctx_.is_cuda() || (proj_.stores_activations() && fc_.stores_activations()),
           "{}'s dx fused with {}'s backward: the GPU form needs the stored path", proj_.name(),
           gelu_name_);
}

void FusedLinearDgelu::backward_stored(BufferView x, BufferView dy, BufferView pre,
                                       BufferView d_pre, BufferView d_gelu, std::size_t batch,
                                       bool accumulate) {
  last_ = proj_.backward_stored_dgelu(x, dy, pre, d_pre, d_gelu, fc_.bias_gradient(), batch,
                                      accumulate);
  ran_ = true;
  // c_fc's backward comes next: its bias gradient is written only where
  // DGELU_BGRAD ran (DGELU alone and the unfused pair leave it to c_fc).
  fc_.set_bias_gradient_written(last_ == LinearDgeluRan::dgelu_bgrad);
}

void FusedLinearDgelu::backward_twin(float* dx, BufferView pre, BufferView d_pre, bool accumulate) {
  // gelu's width: the last dimension of proj's [T, in] (or [in]) input.
  const Shape& in = proj_.input_shape();
  const std::size_t width = in.rank() == 2 ? in[1] : in.numel();
  linear_dgelu_twin(ctx_, dx, pre, d_pre, fc_.bias_gradient(), d_pre.count / width, width,
                    accumulate);
  last_ = LinearDgeluRan::dgelu_bgrad;
  ran_ = true;
  fc_.set_bias_gradient_written(true);
}

std::string FusedLinearDgelu::describe_kernels() const {
  std::string s = proj_.describe_kernels();
  if (!s.empty()) s += "; ";
  s += fmt::format("dx fused with {}'s backward: ", gelu_name_);
  if (!ctx_.is_cuda())
    return s + fmt::format(
                   "CPU twin of cuBLASLt's DGELU_BGRAD epilogue (fp32 dy W times gelu_tanh' of "
                   "the stored pre-activation, rounded once; {}'s bias gradient summed from the "
                   "unrounded values)",
                   fc_name_);
  s += fmt::format(
      "cublasLt DGELU_BGRAD epilogue: {} d(pre) = gelu_tanh'(pre) · dy W into {}'s output "
      "gradient, {}'s fp32 bias gradient from the same GEMM",
      dtype_name(ctx_.precision()), fc_name_, fc_name_);
  if (ran_ && last_ == LinearDgeluRan::dgelu_bgrad) s += "; last backward: the epilogue ran";
  if (ran_ && last_ == LinearDgeluRan::dgelu)
    s += fmt::format(
        "; last backward: cuBLASLt refused the fp32 bias gradient for this shape, DGELU alone "
        "ran ({} reduced its own)",
        fc_name_);
  if (ran_ && last_ == LinearDgeluRan::refused)
    s += "; last backward: cuBLASLt refused the DGELU epilogue for this shape, the unfused pair "
         "ran (dx, then gelu's backward)";
  if (const std::size_t n = linear_dgelu_bgrad_refused_shapes(ctx_); n > 0)
    s += fmt::format("; {} shape(s) of this context ran DGELU without the bias gradient", n);
  if (const std::size_t n = linear_dgelu_refused_shapes(ctx_); n > 0)
    s += fmt::format("; {} shape(s) of this context refused DGELU", n);
  return s;
}

}  // namespace ringtrain
