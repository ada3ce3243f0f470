// The layers of several inputs: add (a residual sum) and concat (along
// channels, or features for flat inputs).
#pragma once

#include "model/layer.h"

namespace ringtrain {

// y = x0 + scale * (x1 + x2 + ...); every input of the same shape.
class AddLayer final : public Layer, public StoresActivations, public PassesGradientThrough {
 public:
  AddLayer(std::string name, const std::vector<Shape>& inputs, float scale,
           const ComputeContext& ctx);
  bool takes_many_inputs() const override { return true; }
  void forward(const float* x, float* y, std::size_t batch, bool training) override;
  void backward(const float* x, const float* y, const float* dy, float* dx, std::size_t batch,
                bool accumulate) override;
  void forward_many(const std::vector<const float*>& xs, float* y, std::size_t batch,
                    bool training) override;
  void backward_many(const std::vector<const float*>& xs, const float* y, const float* dy,
                     const std::vector<float*>& dxs, std::size_t batch, bool accumulate) override;
  // Two inputs: summed in one pass in the storage dtype (sum_two_stored);
  // more go through the model's fp32 adapter.
  bool stores_activations() const override { return inputs_ == 2; }
  void forward_stored(const std::vector<BufferView>& xs, BufferView y, std::size_t batch,
                      bool training) override;
  void backward_stored(const std::vector<BufferView>& xs, BufferView y, BufferView dy,
                       const std::vector<BufferView>& dxs, std::size_t batch,
                       bool accumulate) override;
  // x0 enters unscaled: dx0 = dy.
  std::size_t gradient_passthrough_input() const override { return 0; }
  bool backward_reads_input(std::size_t) const override { return false; }  // dx_k = scale_k dy
  float scale() const { return scale_; }

 private:
  const ComputeContext& ctx_;
  std::size_t inputs_;
  float scale_;
};

// [C_i, H, W] inputs -> [sum C_i, H, W] (or [F_i] -> [sum F_i]). NCHW: a
// sample's inputs are blocks one after another; channels-last: each pixel's
// channel vectors are, so the blocks are per pixel.
class ConcatLayer final : public Layer, public StoresActivations {
 public:
  ConcatLayer(std::string name, const std::vector<Shape>& inputs, const ComputeContext& ctx,
              Layout layout = Layout::nchw);
  bool takes_many_inputs() const override { return true; }
  void forward(const float* x, float* y, std::size_t batch, bool training) override;
  void backward(const float* x, const float* y, const float* dy, float* dx, std::size_t batch,
                bool accumulate) override;
  void forward_many(const std::vector<const float*>& xs, float* y, std::size_t batch,
                    bool training) override;
  void backward_many(const std::vector<const float*>& xs, const float* y, const float* dy,
                     const std::vector<float*>& dxs, std::size_t batch, bool accumulate) override;
  void forward_stored(const std::vector<BufferView>& xs, BufferView y, std::size_t batch,
                      bool training) override;
  void backward_stored(const std::vector<BufferView>& xs, BufferView y, BufferView dy,
                       const std::vector<BufferView>& dxs, std::size_t batch,
                       bool accumulate) override;

 private:
  const ComputeContext& ctx_;
  std::vector<std::size_t> sizes_;  // elements of each input per block
  std::size_t total_ = 0;
  std::size_t blocks_per_sample_ = 1;  // H * W channels-last, else 1
};

}  // namespace ringtrain
