// The fused node of the model's plan for a residual add and the LayerNorm
// that reads its sum (ops/residual_layer_norm.h): GPT-2's x + attn -> ln_2,
// x + mlp -> ln_1 of the next block, and the last sum -> ln_f. Model::build
// rewrites add -> layer_norm into it unless --fuse off.
//
// It sits on the layer_norm's node and reads the add's two inputs. Unlike a
// folded BatchNorm, the folded add keeps its output buffer and its gradient's:
// the sum has other readers (the next residual add), so the fused node writes
// it, and in backward reads the sum's gradient those readers have put there
// (fp32 where they are several), adds LayerNorm's dx, rounds once, and writes
// the add's input gradients. The add node runs nothing; names, parameters
// and checkpoints are unchanged.
#pragma once

#include <string>
#include <vector>

#include "model/layer.h"
#include "model/layer_norm_layer.h"

namespace ringtrain {

class FusedResidualLayerNorm final : public DescribesKernels {
 public:
  // `folded`: the names of the nodes it runs, in order (add, layer_norm).
  FusedResidualLayerNorm(LayerNormLayer& ln, float scale, std::vector<std::string> folded);
  // xs: the add's inputs; sum: the add's output.
  void forward(const std::vector<BufferView>& xs, BufferView sum, BufferView y, std::size_t batch);
  // dxs: the add's inputs' gradients (null views: not wanted); d_sum and
  // `summed` as residual_layer_norm_backward's.
  void backward(BufferView sum, BufferView dy, BufferView d_sum, bool summed,
                const std::vector<BufferView>& dxs, std::size_t batch, bool accumulate);
  std::string describe_kernels() const override;

 private:
  LayerNormLayer& ln_;
  float scale_;
  std::vector<std::string> folded_;
};

}  // namespace ringtrain
