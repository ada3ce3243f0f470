#include "model/token_embedding_layer.h"

#include "model/gpt2_init.h"
#include "ringtrain/ops/merge.h"
#include "ringtrain/ops/transformer_ops.h"

namespace ringtrain {

TokenEmbeddingLayer::TokenEmbeddingLayer(std::string name, const Shape& input, std::size_t vocab,
                                         std::size_t dim, const ComputeContext& ctx,
                                         std::size_t max_batch)
    : Layer(std::move(name), input, Shape{input.numel(), dim}),
      ctx_(ctx),
      t_(input.numel()),
      vocab_(vocab),
      dim_(dim) {
  const std::size_t bytes = token_embedding_backward_workspace_bytes(ctx, max_batch * t_, vocab);
  if (bytes > 0)
    sort_workspace_ =
        Tensor::zeros({(bytes + sizeof(float) - 1) / sizeof(float)}, DType::f32, ctx.device());
}

std::vector<ParamDesc> TokenEmbeddingLayer::param_descs() const {
  return {{"weight", Shape{vocab_, dim_}, kGpt2InitFanIn}};
}

void TokenEmbeddingLayer::bind(float* params, float* grads) {
  w_ = params;
  dw_ = grads;
}

void TokenEmbeddingLayer::forward(const float* x, float* y, std::size_t batch, bool) {
  token_embedding_forward(ctx_, x, w_, batch * t_, t_, vocab_, dim_, y, name());
}

void TokenEmbeddingLayer::backward(const float* x, const float*, const float* dy, float* dx,
                                   std::size_t batch, bool accumulate) {
  // A tied head wrote its part of dW already: add to it.
  token_embedding_backward(ctx_, x, dy, batch * t_, vocab_, dim_, dw_, accumulate || shared_,
                           sort_workspace_.data_as<float>(), sort_workspace_.bytes());
  // Token ids have no gradient.
  if (dx != nullptr) zero_floats(ctx_, dx, batch * t_);
}

void TokenEmbeddingLayer::forward_stored(const std::vector<BufferView>& xs, BufferView y,
                                         std::size_t batch, bool) {
  token_embedding_forward(ctx_, xs.at(0).as<const float>(), w_, batch * t_, t_, vocab_, dim_, y,
                          name());
}

void TokenEmbeddingLayer::backward_stored(const std::vector<BufferView>& xs, BufferView,
                                          BufferView dy, const std::vector<BufferView>& dxs,
                                          std::size_t batch, bool accumulate) {
  // A tied head wrote its part of dW already: add to it.
  token_embedding_backward(ctx_, xs.at(0).as<const float>(), dy, batch * t_, vocab_, dim_, dw_,
                           accumulate || shared_, sort_workspace_.data_as<float>(),
                           sort_workspace_.bytes());
  // Token ids have no gradient.
  if (dxs.at(0).ptr != nullptr) zero_stored(ctx_, dxs[0]);
}

}  // namespace ringtrain
