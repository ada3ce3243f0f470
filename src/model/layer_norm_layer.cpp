#include "model/layer_norm_layer.h"

#include "ringtrain/ops/residual_layer_norm.h"
#include "ringtrain/ops/transformer_ops.h"

namespace ringtrain {

LayerNormLayer::LayerNormLayer(std::string name, const Shape& input, float eps,
                               const ComputeContext& ctx, std::size_t max_batch)
    : Layer(std::move(name), input, input),
      ctx_(ctx),
      rows_(input.numel() / input[input.rank() - 1]),
      c_(input[input.rank() - 1]),
      eps_(eps),
      mean_(ctx, rows_, max_batch),
      rstd_(ctx, rows_, max_batch) {}

std::vector<ParamDesc> LayerNormLayer::param_descs() const {
  return {{"weight", Shape{c_}, 0, 1.0f}, {"bias", Shape{c_}, 0, 0.0f}};
}

void LayerNormLayer::bind(float* params, float* grads) {
  w_ = params;
  b_ = params + c_;
  dw_ = grads;
  db_ = grads + c_;
}

void LayerNormLayer::forward(const float* x, float* y, std::size_t batch, bool) {
  layer_norm_forward(ctx_, x, w_, b_, batch * rows_, c_, eps_, y, mean_.get(batch, name()),
                     rstd_.get(batch, name()));
}

void LayerNormLayer::backward(const float* x, const float*, const float* dy, float* dx,
                              std::size_t batch, bool accumulate) {
  layer_norm_backward(ctx_, x, w_, dy, batch * rows_, c_, mean_.get(batch, name()),
                      rstd_.get(batch, name()), dx, dw_, db_, accumulate);
}

void LayerNormLayer::forward_stored(const std::vector<BufferView>& xs, BufferView y,
                                    std::size_t batch, bool) {
  layer_norm_forward(ctx_, xs.at(0), w_, b_, batch * rows_, c_, eps_, y, mean_.get(batch, name()),
                     rstd_.get(batch, name()));
}

void LayerNormLayer::backward_stored(const std::vector<BufferView>& xs, BufferView, BufferView dy,
                                     const std::vector<BufferView>& dxs, std::size_t batch,
                                     bool accumulate) {
  layer_norm_backward(ctx_, xs.at(0), w_, dy, batch * rows_, c_, mean_.get(batch, name()),
                      rstd_.get(batch, name()), dxs.at(0), dw_, db_, accumulate);
}

void LayerNormLayer::forward_residual(BufferView x0, BufferView x1, float scale, BufferView sum,
                                      BufferView y, std::size_t batch) {
  residual_layer_norm_forward(ctx_, x0, x1, scale, w_, b_, batch * rows_, c_, eps_, sum, y,
                              mean_.get(batch, name()), rstd_.get(batch, name()));
}

void LayerNormLayer::backward_residual(BufferView sum, BufferView dy, BufferView d_sum, bool summed,
                                       float scale, BufferView dx0, BufferView dx1,
                                       std::size_t batch, bool accumulate) {
  residual_layer_norm_backward(ctx_, sum, w_, dy, batch * rows_, c_, mean_.get(batch, name()),
                               rstd_.get(batch, name()), d_sum, summed, scale, dx0, dx1, dw_, db_,
                               accumulate);
}

}  // namespace ringtrain
