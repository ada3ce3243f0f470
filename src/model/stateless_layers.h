// The layers without parameters.
#pragma once

#include "model/layer.h"
#include "ringtrain/ops/activation.h"
#include "ringtrain/ops/pool2d.h"

namespace ringtrain {

// An elementwise activation y = f(x): one layer class, parameterised by the
// function. Its derivative reads either the forward's output (relu) or its
// input (gelu), whichever the op takes.
struct ElementwiseActivation {
  using Forward = void (*)(const ComputeContext&, const float* x, float* y, std::size_t n);
  using Backward = void (*)(const ComputeContext&, const float* x_or_y, const float* dy, float* dx,
                            std::size_t n);
  Forward forward;
  Backward backward;
  bool backward_reads_output;
  // The stored forms (StoresActivations), where the function has them.
  using ForwardStored = void (*)(const ComputeContext&, BufferView x, BufferView y);
  using BackwardStored = void (*)(const ComputeContext&, BufferView x_or_y, BufferView dy,
                                  BufferView dx);
  ForwardStored forward_stored = nullptr;
  BackwardStored backward_stored = nullptr;
};

inline constexpr ElementwiseActivation kReluActivation{relu_forward, relu_backward, true,
                                                       relu_forward, relu_backward};
inline constexpr ElementwiseActivation kGeluActivation{gelu_forward, gelu_backward, false};
inline constexpr ElementwiseActivation kGeluTanhActivation{
    gelu_tanh_forward, gelu_tanh_backward, false, gelu_tanh_forward, gelu_tanh_backward};

class ElementwiseActivationLayer final : public Layer, public StoresActivations {
 public:
  ElementwiseActivationLayer(std::string name, const Shape& input, const ComputeContext& ctx,
                             const ElementwiseActivation& f)
      : Layer(std::move(name), input, input), ctx_(ctx), f_(f) {}
  void forward(const float* x, float* y, std::size_t batch, bool training) override;
  void backward(const float* x, const float* y, const float* dy, float* dx, std::size_t batch,
                bool accumulate) override;
  bool stores_activations() const override { return f_.forward_stored != nullptr; }
  void forward_stored(const std::vector<BufferView>& xs, BufferView y, std::size_t batch,
                      bool training) override;
  void backward_stored(const std::vector<BufferView>& xs, BufferView y, BufferView dy,
                       const std::vector<BufferView>& dxs, std::size_t batch,
                       bool accumulate) override;

 private:
  const ComputeContext& ctx_;
  ElementwiseActivation f_;
};

// [C, H, W] -> [C*H*W]: the same memory, so a view (no copy either way).
// Channels-last, the graph leaves the spatial domain here: the features are
// transposed back to NCHW order, so the layer after it (and its weights) sees
// what it sees in NCHW; then flatten is a copy, not a view.
class FlattenLayer final : public Layer, public StoresActivations {
 public:
  FlattenLayer(std::string name, const Shape& input, const ComputeContext& ctx,
               Layout layout = Layout::nchw)
      : Layer(std::move(name), input, Shape{input.numel()}),
        ctx_(ctx),
        transposes_(layout == Layout::nhwc && input.rank() == 3) {}
  bool is_view() const override { return !transposes_; }
  void forward(const float* x, float* y, std::size_t batch, bool training) override;
  void backward(const float* x, const float* y, const float* dy, float* dx, std::size_t batch,
                bool accumulate) override;
  // The transpose moves 16-bit words as they are (a view has nothing to store).
  bool stores_activations() const override { return transposes_; }
  void forward_stored(const std::vector<BufferView>& xs, BufferView y, std::size_t batch,
                      bool training) override;
  void backward_stored(const std::vector<BufferView>& xs, BufferView y, BufferView dy,
                       const std::vector<BufferView>& dxs, std::size_t batch,
                       bool accumulate) override;

 private:
  const ComputeContext& ctx_;
  bool transposes_;
};

class DropoutLayer final : public Layer, public StoresActivations {
 public:
  // Channels-last [C, H, W] input: masked by each element's NCHW index, so
  // the same elements drop as in NCHW.
  DropoutLayer(std::string name, const Shape& input, float p, std::size_t index,
               const ComputeContext& ctx, const DropoutContext& context,
               Layout layout = Layout::nchw)
      : Layer(std::move(name), input, input),
        ctx_(ctx),
        p_(p),
        index_(index),
        context_(context),
        nhwc_channels_(layout == Layout::nhwc && input.rank() == 3 ? input[0] : 0),
        nhwc_hw_(nhwc_channels_ > 0 ? input[1] * input[2] : 0) {}
  void forward(const float* x, float* y, std::size_t batch, bool training) override;
  void backward(const float* x, const float* y, const float* dy, float* dx, std::size_t batch,
                bool accumulate) override;
  void forward_stored(const std::vector<BufferView>& xs, BufferView y, std::size_t batch,
                      bool training) override;
  void backward_stored(const std::vector<BufferView>& xs, BufferView y, BufferView dy,
                       const std::vector<BufferView>& dxs, std::size_t batch,
                       bool accumulate) override;
  float rate() const { return p_; }
  bool backward_reads_input(std::size_t) const override { return false; }  // the mask, by its key

 private:
  std::uint64_t key() const;
  const ComputeContext& ctx_;
  float p_;
  std::size_t index_;
  const DropoutContext& context_;
  std::size_t nhwc_channels_, nhwc_hw_;  // 0: NCHW (or flat) order
  bool last_training_ = true;
};

class Pool2dLayer final : public Layer, public StoresActivations {
 public:
  Pool2dLayer(std::string name, const Pool2dGeometry& g, const ComputeContext& ctx,
              std::size_t max_batch);
  void forward(const float* x, float* y, std::size_t batch, bool training) override;
  void backward(const float* x, const float* y, const float* dy, float* dx, std::size_t batch,
                bool accumulate) override;
  void forward_stored(const std::vector<BufferView>& xs, BufferView y, std::size_t batch,
                      bool training) override;
  void backward_stored(const std::vector<BufferView>& xs, BufferView y, BufferView dy,
                       const std::vector<BufferView>& dxs, std::size_t batch,
                       bool accumulate) override;

 private:
  Pool2dOp op_;
};

// [C, H, W] -> [C]: each channel's mean (torchvision's adaptive_avg_pool2d(1)
// followed by flatten). Its output is [C] in either layout, so channels-last
// ends here with no transpose.
class GlobalAvgPoolLayer final : public Layer, public StoresActivations {
 public:
  GlobalAvgPoolLayer(std::string name, const Shape& input, const ComputeContext& ctx,
                     Layout layout = Layout::nchw)
      : Layer(std::move(name), input, Shape{input[0]}), ctx_(ctx), layout_(layout) {}
  void forward(const float* x, float* y, std::size_t batch, bool training) override;
  void backward(const float* x, const float* y, const float* dy, float* dx, std::size_t batch,
                bool accumulate) override;
  void forward_stored(const std::vector<BufferView>& xs, BufferView y, std::size_t batch,
                      bool training) override;
  void backward_stored(const std::vector<BufferView>& xs, BufferView y, BufferView dy,
                       const std::vector<BufferView>& dxs, std::size_t batch,
                       bool accumulate) override;

 private:
  const ComputeContext& ctx_;
  Layout layout_;
};

}  // namespace ringtrain
