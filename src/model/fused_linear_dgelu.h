// The backward half of the linear -> gelu_tanh fusion (model/
// fused_linear_gelu.h): where that gelu's output has one reader and it is a
// linear layer (GPT-2's c_fc -> gelu -> c_proj), Model::build gives the
// reader (c_proj) this node, which runs its dx GEMM with cuBLASLt's
// DGELU_BGRAD epilogue (ops/linear_dgelu.h): the GEMM writes the gradient of
// the pre-activation (c_fc's output gradient) and c_fc's bias gradient, so
// gelu's backward is skipped and c_fc's skips its bias reduction.
//
//   forward:   x --c_fc + GELU_AUX_BIAS--> pre (aux), y --c_proj--> out
//   backward:  d_out --c_proj dW, db (BGRADB)
//              d_out W_proj --DGELU_BGRAD(aux = pre)--> d_pre, db_fc
//              d_pre --c_fc dW, dx (its db not reduced again)
//
// d_pre = round16(gelu'(pre) · fp32 dx) where the unfused pair takes gelu'
// of the rounded dx: not the unfused plan's bits under bf16/fp16, so it is
// planned where the forward's fusion is (ModelOptions::fuse_linear_gelu;
// automatic = a GPU under bf16/fp16). On the CPU (`on`, for tests) it runs
// the twin: the model's adapter computes c_proj's fp32 dx, then
// linear_dgelu_twin rounds gelu' times it once and sums c_fc's bias gradient
// from the unrounded values; under fp32 that is the unfused pair bit for bit.
//
// Each GPU backward decides per shape (cached): DGELU_BGRAD; DGELU alone
// where cuBLASLt refuses the fp32 bias gradient (c_fc then reduces its own);
// or, where it refuses both, the unfused pair (dx into gelu's gradient, then
// gelu's backward), which describe_kernels names.
#pragma once

#include <string>

#include "model/layer.h"
#include "model/linear_layer.h"
#include "ringtrain/ops/linear_dgelu.h"

namespace ringtrain {

class FusedLinearDgelu final : public DescribesKernels {
 public:
  // proj: the reader of gelu's output (its dx fuses); fc: the linear before
  // the gelu (whose bias gradient the epilogue writes). Names for the text.
  FusedLinearDgelu(LinearLayer& proj, LinearLayer& fc, const ComputeContext& ctx,
                   std::string gelu_name, std::string fc_name);
  // The GPU: proj's stored backward (x: gelu's output, dy: proj's output
  // gradient) with dx through the epilogue into d_pre, the gradient of fc's
  // output `pre`; where cuBLASLt refused it, into d_gelu (gelu's output
  // gradient), and gelu's backward is the caller's.
  void backward_stored(BufferView x, BufferView dy, BufferView pre, BufferView d_pre,
                       BufferView d_gelu, std::size_t batch, bool accumulate);
  // The CPU twin, after proj's fp32 backward through the adapter wrote its
  // dx (fp32, batch x gelu's width; overwritten) in place of gelu's gradient.
  void backward_twin(float* dx, BufferView pre, BufferView d_pre, bool accumulate);
  // The last backward wrote d_pre: gelu's backward is not to run.
  bool wrote_pre_gradient() const { return last_ != LinearDgeluRan::refused; }
  // proj's own kernels, then "; dx fused with <gelu>'s backward: " and the
  // epilogue, the CPU twin, or what cuBLASLt refused.
  std::string describe_kernels() const override;

 private:
  LinearLayer& proj_;
  LinearLayer& fc_;
  const ComputeContext& ctx_;
  std::string gelu_name_, fc_name_;
  LinearDgeluRan last_ = LinearDgeluRan::refused;
  bool ran_ = false;  // a backward has run
};

}  // namespace ringtrain
