#include "model/position_embedding_layer.h"

#include "model/gpt2_init.h"
#include "ringtrain/ops/bias.h"
#include "ringtrain/ops/merge.h"
#include "ringtrain/ops/transformer_ops.h"

namespace ringtrain {

PositionEmbeddingLayer::PositionEmbeddingLayer(std::string name, const Shape& input,
                                               std::size_t context, const ComputeContext& ctx)
    : Layer(std::move(name), input, input),
      ctx_(ctx),
      t_(input[0]),
      c_(input[1]),
      context_(context) {}

std::vector<ParamDesc> PositionEmbeddingLayer::param_descs() const {
  return {{"weight", Shape{context_, c_}, kGpt2InitFanIn}};
}

void PositionEmbeddingLayer::bind(float* params, float* grads) {
  w_ = params;
  dw_ = grads;
}

void PositionEmbeddingLayer::forward(const float* x, float* y, std::size_t batch, bool) {
  add_broadcast_rows(ctx_, x, w_, y, batch, t_ * c_);
}

void PositionEmbeddingLayer::backward(const float*, const float*, const float* dy, float* dx,
                                      std::size_t batch, bool accumulate) {
  broadcast_rows_grad(ctx_, dy, dw_, batch, t_ * c_, context_ * c_, accumulate);
  if (dx != nullptr) copy_floats(ctx_, dx, dy, batch * t_ * c_);
}

void PositionEmbeddingLayer::forward_stored(const std::vector<BufferView>& xs, BufferView y,
                                            std::size_t batch, bool) {
  bias_add_into(ctx_, y, xs.at(0), w_, batch, t_ * c_, 1);
}

void PositionEmbeddingLayer::backward_stored(const std::vector<BufferView>&, BufferView,
                                             BufferView dy, const std::vector<BufferView>& dxs,
                                             std::size_t batch, bool accumulate) {
  // The rows of the table past T get no gradient: zeroed unless accumulating.
  bias_grad(ctx_, dy, dw_, batch, t_ * c_, 1, accumulate);
  if (!accumulate && context_ > t_) zero_floats(ctx_, dw_ + t_ * c_, (context_ - t_) * c_);
  if (dxs.at(0).ptr != nullptr) scale_stored(ctx_, dxs[0], dy, 1.0f);
}

}  // namespace ringtrain
