// The fused node of the model's plan for linear (with its bias) -> gelu_tanh,
// GPT-2's c_fc -> gelu: Model::build rewrites the pair into it where the
// linear's output has the gelu as its one reader. On a GPU it is one cuBLASLt
// GEMM whose GELU_AUX_BIAS epilogue writes gelu's output and, as its
// auxiliary, the pre-activation into the linear node's own output buffer:
// gelu's backward then reads it exactly where the unfused plan keeps it, and
// both nodes' backwards run unchanged (or, where the gelu's one reader is a
// linear layer, gelu's backward runs inside that reader's dx GEMM:
// model/fused_linear_dgelu.h). Only the forward fuses here: the linear
// node stays in the plan with its buffers (`forward fused into` in bench
// step --layers), its forward skipped.
//
// Gelu is taken of the fp32 pre-activation, which the unfused pair rounds
// first: under bf16/fp16 the output is not the unfused plan's bits (the
// pre-activation is), unlike every other fusion here. So the model plans it
// on a GPU under bf16/fp16 only (where it saves a pass over the MLP's widest
// tensor), unless ModelOptions::fuse_linear_gelu asks otherwise; on the CPU
// (tests) it runs the twin of the epilogue's arithmetic: the layer's fp32
// product plus bias, then gelu_tanh_forward_with_aux. Under fp32 the twin is
// the unfused pair bit for bit.
//
// Where cuBLASLt refuses the epilogue for the shape, the GPU forward runs the
// unfused pair (the linear's stored forward, then gelu's), the numbers of
// --fuse off, and describe_kernels says so.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "model/layer.h"
#include "model/layer_workspace.h"
#include "model/linear_layer.h"

namespace ringtrain {

class FusedLinearGelu final : public DescribesKernels {
 public:
  // `folded`: the names of the nodes it runs (linear, gelu). `workspace`:
  // the CPU twin's (the widened input and the fp32 pre-activation, shared by
  // the plan's fused pairs: they run one at a time), at least
  // workspace_floats(linear) per sample; null on a GPU.
  FusedLinearGelu(LinearLayer& linear, StoresActivations& gelu, const ComputeContext& ctx,
                  std::vector<std::string> folded, std::shared_ptr<LayerWorkspace> workspace);
  // x: the linear's input; pre: the linear's output (the auxiliary); y: the
  // gelu's output. All of the storage dtype (x may be the fp32 model input).
  void forward(BufferView x, BufferView pre, BufferView y, std::size_t batch, bool training);
  // "fused c_fc+gelu: " and the epilogue, the CPU twin, or the unfused pair
  // where cuBLASLt refused it.
  std::string describe_kernels() const override;
  // The plan runs gelu's backward inside its reader's dx GEMM
  // (model/fused_linear_dgelu.h): said in describe_kernels.
  void set_backward_fused_into(std::string reader) { backward_by_ = std::move(reader); }
  // Floats per sample the CPU twin needs.
  static std::size_t workspace_floats(const LinearLayer& linear);

 private:
  enum class Ran { not_yet, epilogue, unfused };
  LinearLayer& linear_;
  StoresActivations& gelu_;
  const ComputeContext& ctx_;
  std::vector<std::string> folded_;
  std::shared_ptr<LayerWorkspace> workspace_;
  Ran last_ = Ran::not_yet;  // what this node's last GPU forward ran
  std::vector<BufferView> gelu_input_;
  std::string backward_by_;  // empty: gelu's own backward
};

}  // namespace ringtrain
