#include "model/tied_lm_head_layer.h"

#include "ringtrain/core/check.h"
#include "ringtrain/ops/gemm.h"
#include "ringtrain/ops/merge.h"
#include "ringtrain/ops/precision.h"
#include "ringtrain/ops/transformer_ops.h"

namespace ringtrain {

namespace {
// The padded vocabulary: a multiple of 64 (GPT-2's 50,257 -> 50,304, as
// llm.c pads it), so that every 16-bit row of the logits and of E16 starts
// 16-byte aligned; cuBLAS's tensor-core kernels want that of a leading
// dimension. E16's padded rows are zeros, so the padded logits are 0 and the
// products over the padded columns of dy (which the loss writes 0) add
// nothing.
constexpr std::size_t kVocabAlign = 64;
}  // namespace

std::size_t TiedLmHeadLayer::padded_vocab(std::size_t vocab) {
  return (vocab + kVocabAlign - 1) / kVocabAlign * kVocabAlign;
}

TiedLmHeadLayer::TiedLmHeadLayer(std::string name, const Shape& input, std::string embedding,
                                 std::size_t vocab, const ComputeContext& ctx)
    : Layer(std::move(name), input, Shape{input[0], vocab}),
      ctx_(ctx),
      embedding_(std::move(embedding)),
      t_(input[0]),
      c_(input[1]),
      vocab_(vocab),
      vocab_padded_(padded_vocab(vocab)),
      row_stride_(vocab) {
  if (!stores_activations()) return;
  // The padded rows stay zero: each forward narrows only the first vocab rows.
  e16_ = Tensor::zeros({vocab_padded_ * c_}, ctx_.precision(), ctx_.device());
}

std::size_t TiedLmHeadLayer::padded_row_stride(DType storage) const {
  return storage == DType::f32 ? vocab_ : vocab_padded_;
}

void TiedLmHeadLayer::set_output_row_stride(std::size_t stride) {
  RT_CHECK(stride == vocab_ || stride == vocab_padded_,
           "layer '{}': a logits row stride of {} is neither the vocabulary {} nor its padded {}",
           name(), stride, vocab_, vocab_padded_);
  row_stride_ = stride;
}

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

// The logits straight into the model's 16-bit buffer, rows row_stride_ apart:
// one GEMM over all rows, its fp32 sums rounded once by its own store (no
// fp32 copy of the logits, no narrowing pass). Over the padded width it
// writes the padded columns too, as zeros.
void TiedLmHeadLayer::forward_stored(const std::vector<BufferView>& xs, BufferView y,
                                     std::size_t batch, bool) {
  RT_CHECK(e_ != nullptr, "layer '{}': not tied to the embedding '{}'", name(), embedding_);
  const BufferView& x = xs.at(0);
  const std::size_t rows = batch * t_, ld = row_stride_;
  RT_CHECK(y.count >= rows * ld, "layer '{}': {} logits for {} rows {} apart", name(), y.count,
           rows, ld);
  // E's 16-bit copy for this step's products (the weights change only
  // between a backward and the next forward).
  convert_storage(ctx_, e16_.buffer().slice(0, vocab_ * c_),
                  view_of(e_, vocab_ * c_, ctx_.device()));
  gemm_stored_epilogue(ctx_, false, true, rows, ld, c_, x, c_, e16_.buffer(), c_, 0.0f, y, ld);
}

// dy is read in place with its row stride: dE = dyᵀ x into the fp32
// gradient (first: the embedding adds its own after), and dx = dy E16
// written by the GEMM in dx's dtype (16 bits, or fp32 where the model sums).
// Over the padded width the loss's zeros meet E16's zero rows.
void TiedLmHeadLayer::backward_stored(const std::vector<BufferView>& xs, BufferView, BufferView dy,
                                      const std::vector<BufferView>& dxs, std::size_t batch,
                                      bool accumulate) {
  const std::size_t rows = batch * t_, ld = row_stride_;
  const BufferView& x = xs.at(0);
  const BufferView& dx = dxs.at(0);
  RT_CHECK(dy.count >= rows * ld, "layer '{}': {} logit gradients for {} rows {} apart", name(),
           dy.count, rows, ld);
  if (rows == 0) {
    if (!accumulate) zero_floats(ctx_, de_, vocab_ * c_);
    return;
  }
  gemm_stored(ctx_, true, false, vocab_, c_, rows, 1.0f, dy, ld, x, c_, accumulate ? 1.0f : 0.0f,
              de_, c_);
  if (dx.ptr != nullptr)
    gemm_stored_epilogue(ctx_, false, false, rows, c_, ld, dy, ld, e16_.buffer(), c_, 0.0f, dx, c_);
}

}  // namespace ringtrain
