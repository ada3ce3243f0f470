#include "model/tied_lm_head_layer.h"

#include <algorithm>

#include "ringtrain/core/check.h"
#include "ringtrain/ops/gemm.h"
#include "ringtrain/ops/merge.h"
#include "ringtrain/ops/precision.h"
#include "ringtrain/ops/transformer_ops.h"

namespace ringtrain {

namespace {
// The stored path's fp32 scratch: 256 MiB at most, whatever the batch (a
// block of GPT-2's 50,257 logits is 1,315 rows). A block's product is a GEMM
// of that many rows, long enough to keep a GPU busy.
constexpr std::size_t kBlockFloats = std::size_t{64} << 20;

// The stored path's padded vocabulary: a multiple of 64 (GPT-2's 50,257 ->
// 50,304, as llm.c pads it), so that every 16-bit row the GEMMs read or write
// starts 16-byte aligned; cuBLAS's tensor-core kernels want that of a leading
// dimension. The padded rows of E16 and columns of the logits' gradient are
// zeros, so the products over them add nothing, and the padded logits are
// never copied out.
constexpr std::size_t kVocabAlign = 64;
}  // namespace

std::size_t TiedLmHeadLayer::padded_vocab(std::size_t vocab) {
  return (vocab + kVocabAlign - 1) / kVocabAlign * kVocabAlign;
}

TiedLmHeadLayer::TiedLmHeadLayer(std::string name, const Shape& input, std::string embedding,
                                 std::size_t vocab, const ComputeContext& ctx,
                                 std::size_t max_batch, std::size_t block_floats)
    : Layer(std::move(name), input, Shape{input[0], vocab}),
      ctx_(ctx),
      embedding_(std::move(embedding)),
      t_(input[0]),
      c_(input[1]),
      vocab_(vocab),
      vocab_padded_(padded_vocab(vocab)) {
  if (!stores_activations()) return;
  const std::size_t floats = block_floats > 0 ? block_floats : kBlockFloats;
  block_rows_ = std::clamp<std::size_t>(floats / (c_ + vocab_padded_), 1,
                                        std::max<std::size_t>(max_batch, 1) * t_);
  block_ = Tensor::empty({block_rows_ * (c_ + vocab_padded_)}, DType::f32, ctx_.device());
  // The padded rows stay zero: each forward narrows only the first vocab rows.
  e16_ = Tensor::zeros({vocab_padded_ * c_}, ctx_.precision(), ctx_.device());
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

void TiedLmHeadLayer::forward_stored(const std::vector<BufferView>& xs, BufferView y,
                                     std::size_t batch, bool) {
  RT_CHECK(e_ != nullptr, "layer '{}': not tied to the embedding '{}'", name(), embedding_);
  const BufferView& x = xs.at(0);
  const std::size_t rows = batch * t_;
  const Device d = ctx_.device();
  // E's 16-bit copy for this step's products (the weights change only
  // between a backward and the next forward).
  convert_storage(ctx_, e16_.buffer().slice(0, vocab_ * c_), view_of(e_, vocab_ * c_, d));
  const std::size_t vp = vocab_padded_;
  float* y32 = block_.data_as<float>() + block_rows_ * c_;
  for (std::size_t r = 0; r < rows; r += block_rows_) {
    const std::size_t n = std::min(block_rows_, rows - r);
    gemm_stored(ctx_, false, true, n, vp, c_, 1.0f, x.slice(r * c_, n * c_), c_, e16_.buffer(), c_,
                0.0f, y32, vp);
    copy_blocks(ctx_, y.slice(r * vocab_, n * vocab_), vocab_, view_of(y32, n * vp, d), vp, vocab_,
                n);
  }
}

void TiedLmHeadLayer::backward_stored(const std::vector<BufferView>& xs, BufferView, BufferView dy,
                                      const std::vector<BufferView>& dxs, std::size_t batch,
                                      bool accumulate) {
  const std::size_t rows = batch * t_, vp = vocab_padded_;
  const BufferView& x = xs.at(0);
  const BufferView& dx = dxs.at(0);
  const bool wide = dx.dtype == DType::f32;
  const Device d = ctx_.device();
  // A block of dy copied to rows of the padded width (its padded columns
  // zeroed: the scratch is shared with forward's logits), then per block on
  // tensor cores: dE += dy_blockᵀ x_block into the fp32 gradient (first: the
  // embedding adds its own after), and dx = dy_block E16, straight into an
  // fp32 dx, else through the scratch and narrowed.
  if (rows == 0 && !accumulate) zero_floats(ctx_, de_, vocab_ * c_);
  float* dx32 = block_.data_as<float>();
  const BufferView dyp{dx32 + block_rows_ * c_, block_rows_ * vp, dy.dtype, d};
  for (std::size_t r = 0; r < rows; r += block_rows_) {
    const std::size_t n = std::min(block_rows_, rows - r);
    const BufferView dy_block = dyp.slice(0, n * vp);
    zero_stored(ctx_, dy_block);
    copy_blocks(ctx_, dy_block, vp, dy.slice(r * vocab_, n * vocab_), vocab_, vocab_, n);
    gemm_stored(ctx_, true, false, vocab_, c_, n, 1.0f, dy_block, vp, x.slice(r * c_, n * c_), c_,
                accumulate || r > 0 ? 1.0f : 0.0f, de_, c_);
    if (dx.ptr == nullptr) continue;
    float* out = wide ? dx.as<float>() + r * c_ : dx32;
    gemm_stored(ctx_, false, false, n, c_, vp, 1.0f, dy_block, vp, e16_.buffer(), c_, 0.0f, out,
                c_);
    if (!wide) convert_storage(ctx_, dx.slice(r * c_, n * c_), view_of(dx32, n * c_, d));
  }
}

}  // namespace ringtrain
