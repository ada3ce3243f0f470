// Conv2d: weight [out, in, k, k] and (optionally) bias [out], as PyTorch lays them out.
#include "model/conv2d_layer.h"

namespace ringtrain {

namespace {
Shape conv_output(const Conv2dGeometry& g) {
  g.validate();
  return Shape{g.out_channels, g.out_height(), g.out_width()};
}
}  // namespace

Conv2dLayer::Conv2dLayer(std::string name, const Conv2dGeometry& g, const ComputeContext& ctx,
                         std::size_t max_batch, bool bias)
    : Layer(std::move(name), Shape{g.in_channels, g.height, g.width}, conv_output(g)),
      op_(ctx, g, max_batch),
      weight_count_(g.out_channels * g.in_channels * g.kh() * g.kw()),
      bias_(bias) {}

std::vector<ParamDesc> Conv2dLayer::param_descs() const {
  const Conv2dGeometry& g = op_.geometry();
  std::vector<ParamDesc> d{{"weight", Shape{g.out_channels, g.in_channels, g.kh(), g.kw()},
                            g.in_channels * g.kh() * g.kw()}};
  if (bias_) d.push_back({"bias", Shape{g.out_channels}, 0});
  return d;
}

void Conv2dLayer::bind(float* params, float* grads) {
  w_ = params;
  dw_ = grads;
  b_ = bias_ ? params + weight_count_ : nullptr;
  db_ = bias_ ? grads + weight_count_ : nullptr;
}

void Conv2dLayer::forward(const float* x, float* y, std::size_t batch, bool) {
  op_.forward(x, w_, b_, y, batch);
}

void Conv2dLayer::backward(const float* x, const float*, const float* dy, float* dx,
                           std::size_t batch, bool accumulate) {
  op_.backward(x, w_, dy, dx, dw_, db_, batch, accumulate);
}

void Conv2dLayer::forward_stored(const std::vector<BufferView>& xs, BufferView y, std::size_t batch,
                                 bool) {
  op_.forward(xs.at(0), w_, b_, y, batch);
}

void Conv2dLayer::backward_stored(const std::vector<BufferView>& xs, BufferView, BufferView dy,
                                  const std::vector<BufferView>& dxs, std::size_t batch,
                                  bool accumulate) {
  op_.backward(xs.at(0), w_, dy, dxs.at(0), dw_, db_, batch, accumulate);
}

}  // namespace ringtrain
