// The fused node of the model's plan for conv + bias + ReLU
// (Conv2dLayer::forward_relu / backward_relu): Model::build rewrites conv2d
// (with a bias) -> relu into it wherever the convolution's output has no other
// reader, unless --fuse off. As FusedBatchNormRelu, it sits on the relu's node
// and reads the convolution's input; the conv node stays in the plan, folded
// (no activation or gradient buffer), so names, parameters, checkpoints and
// buckets are unchanged, and the conv layer still owns its weights.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "model/conv2d_layer.h"
#include "model/fused_node.h"
#include "model/layer_workspace.h"

namespace ringtrain {

class FusedConvRelu final : public FusedNode {
 public:
  // `folded`: the names of the nodes it runs (conv, relu). `workspace`: shared
  // by the plan's fused convolutions (they run one at a time), at least
  // conv.relu_workspace_floats() per sample.
  FusedConvRelu(Conv2dLayer& conv, std::vector<std::string> folded,
                std::shared_ptr<LayerWorkspace> workspace);
  void forward_stored(const std::vector<BufferView>& xs, BufferView y, std::size_t batch,
                      bool training) override;
  void backward_stored(const std::vector<BufferView>& xs, BufferView y, BufferView dy,
                       const std::vector<BufferView>& dxs, std::size_t batch,
                       bool accumulate) override;
  // Its dx is the convolution's: on the storage grid on every device (cuDNN
  // writes 16 bits; the CPU's convolution rounds).
  bool writes_dx_on_grid(std::size_t /*input*/) const override { return true; }
  // "fused conv1+relu1: " and the convolution's kernels.
  std::string describe_kernels() const override;

 private:
  Conv2dLayer& conv_;
  std::vector<std::string> folded_;
  std::shared_ptr<LayerWorkspace> workspace_;
};

}  // namespace ringtrain
