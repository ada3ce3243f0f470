// The fused node of the model's plan: BatchNorm, an optional residual add
// and the ReLU after them, run as one (ops/batch_norm_relu.h). Model::build
// rewrites bn -> relu and bn -> add -> relu into it wherever BatchNorm's
// output (and the add's) has no other reader, unless --fuse off.
//
// It sits on the relu's node (the chain's last, so every input is computed
// before it, a downsample shortcut included), reading BatchNorm's input and
// the add's other input; the BatchNorm and add nodes stay in the plan, folded
// (they run nothing and hold no activation or gradient buffer). Keeping them
// keeps every node's name, index and parameter range: checkpoints, model show
// and the gradient buckets see the same model, and BatchNorm's layer still
// owns its parameters and running statistics.
#pragma once

#include <string>
#include <vector>

#include "model/batch_norm_layer.h"
#include "model/fused_node.h"

namespace ringtrain {

class FusedBatchNormRelu final : public FusedNode {
 public:
  // `folded`: the names of the nodes it runs, in order (bn, [add,] relu).
  FusedBatchNormRelu(BatchNormLayer& bn, bool with_residual, std::vector<std::string> folded);
  // xs: BatchNorm's input, and the residual with_residual; dxs alike.
  void forward_stored(const std::vector<BufferView>& xs, BufferView y, std::size_t batch,
                      bool training) override;
  void backward_stored(const std::vector<BufferView>& xs, BufferView y, BufferView dy,
                       const std::vector<BufferView>& dxs, std::size_t batch,
                       bool accumulate) override;
  std::string describe_kernels() const override;
  // The second term of the next backward's dy (a null ptr: none), where the
  // output's gradient comes in two (the model's plan: a ResNet block's
  // output, read by a convolution and the next block's fused add): summed
  // as the passes read dy (ops/batch_norm_relu.h), not written first.
  // Taken by that backward alone.
  void set_dy_addend(BufferView addend) { dy_addend_ = addend; }
  // The residual's gradient is dy where the ReLU let it through, else 0: on
  // the grid. BatchNorm's dx is computed in fp32 and rounded.
  bool writes_dx_on_grid(std::size_t input) const override { return with_residual_ && input == 1; }
  // The residual's gradient is masked dy: its values are not read.
  bool backward_reads_input(std::size_t input) const override {
    return !(with_residual_ && input == 1);
  }

 private:
  BatchNormLayer& bn_;
  bool with_residual_;
  std::vector<std::string> folded_;
  BufferView dy_addend_{};
};

}  // namespace ringtrain
