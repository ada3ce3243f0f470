#include "model/tied_lm_head_layer.h"

#include "ringtrain/core/check.h"
#include "ringtrain/ops/gemm.h"

namespace ringtrain {

TiedLmHeadLayer::TiedLmHeadLayer(std::string name, const Shape& input, std::string embedding,
                                 std::size_t vocab, const ComputeContext& ctx)
    : Layer(std::move(name), input, Shape{input[0], vocab}),
      ctx_(ctx),
      embedding_(std::move(embedding)),
      t_(input[0]),
      c_(input[1]),
      vocab_(vocab) {}

void TiedLmHeadLayer::bind(float* params, float* grads) {
  e_ = params;
  de_ = grads;
}

void TiedLmHeadLayer::forward(const float* x, float* y, std::size_t batch, bool) {
  RT_CHECK(e_ != nullptr, "layer '{}': not tied to the embedding '{}'", name(), embedding_);
  gemm(ctx_, false, true, batch * t_, vocab_, c_, 1.0f, x, c_, e_, c_, 0.0f, y, vocab_);
}

void TiedLmHeadLayer::backward(const float* x, const float*, const float* dy, float* dx,
                               std::size_t batch, bool accumulate) {
  const std::size_t rows = batch * t_;
  // dE = dy^T x (written first: the embedding adds its own after), dx = dy E.
  // dy and x are stored on the --precision grid, so dE may take 16-bit inputs
  // (gemm.h); E is the embedding's fp32 table (docs/precision.md), so the
  // forward and dx stay fp32 products.
  gemm(ctx_, true, false, vocab_, c_, rows, 1.0f, dy, vocab_, x, c_, accumulate ? 1.0f : 0.0f, de_,
       c_, ctx_.precision());
  if (dx != nullptr)
    gemm(ctx_, false, false, rows, c_, vocab_, 1.0f, dy, vocab_, e_, c_, 0.0f, dx, c_);
}

}  // namespace ringtrain
