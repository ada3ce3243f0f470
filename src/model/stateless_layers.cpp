// The layers without parameters: elementwise activations (ReLU, GELU), Flatten, Dropout, Pool2d.
#include "model/stateless_layers.h"

#include "ringtrain/ops/activation.h"
#include "ringtrain/ops/dropout.h"
#include "ringtrain/ops/layout_transpose.h"

namespace ringtrain {

void ElementwiseActivationLayer::forward(const float* x, float* y, std::size_t batch, bool) {
  f_.forward(ctx_, x, y, batch * input_shape().numel());
}
void ElementwiseActivationLayer::backward(const float* x, const float* y, const float* dy,
                                          float* dx, std::size_t batch, bool) {
  if (dx != nullptr)
    f_.backward(ctx_, f_.backward_reads_output ? y : x, dy, dx, batch * input_shape().numel());
}

void ElementwiseActivationLayer::forward_stored(const std::vector<BufferView>& xs, BufferView y,
                                                std::size_t, bool) {
  f_.forward_stored(ctx_, xs.at(0), y);
}
void ElementwiseActivationLayer::backward_stored(const std::vector<BufferView>& xs, BufferView y,
                                                 BufferView dy, const std::vector<BufferView>& dxs,
                                                 std::size_t, bool) {
  if (dxs.at(0).ptr != nullptr)
    f_.backward_stored(ctx_, f_.backward_reads_output ? y : xs.at(0), dy, dxs[0]);
}

void FlattenLayer::forward(const float* x, float* y, std::size_t batch, bool) {
  if (!transposes_) return;
  const Shape& in = input_shape();
  nhwc_to_nchw(ctx_, x, y, batch, in[0], in[1] * in[2]);
}
void FlattenLayer::backward(const float*, const float*, const float* dy, float* dx,
                            std::size_t batch, bool) {
  if (!transposes_ || dx == nullptr) return;
  const Shape& in = input_shape();
  nchw_to_nhwc(ctx_, dy, dx, batch, in[0], in[1] * in[2]);
}

void FlattenLayer::forward_stored(const std::vector<BufferView>& xs, BufferView y,
                                  std::size_t batch, bool) {
  const Shape& in = input_shape();
  transpose_batched(ctx_, xs.at(0), y, batch, in[1] * in[2], in[0]);  // NHWC -> NCHW
}
void FlattenLayer::backward_stored(const std::vector<BufferView>&, BufferView, BufferView dy,
                                   const std::vector<BufferView>& dxs, std::size_t batch, bool) {
  if (dxs.at(0).ptr == nullptr) return;
  const Shape& in = input_shape();
  transpose_batched(ctx_, dy, dxs[0], batch, in[0], in[1] * in[2]);  // NCHW -> NHWC
}

std::uint64_t DropoutLayer::key() const {
  return dropout_mask_key(context_.seed, context_.rank, context_.step, index_);
}

void DropoutLayer::forward(const float* x, float* y, std::size_t batch, bool training) {
  // Evaluation keeps everything: p = 0 makes the factor exactly 1.
  dropout_apply(ctx_, x, y, batch * input_shape().numel(), key(), training ? p_ : 0.0f,
                nhwc_channels_, nhwc_hw_);
  last_training_ = training;
}

void DropoutLayer::backward(const float*, const float*, const float* dy, float* dx,
                            std::size_t batch, bool) {
  // The mask is a function of the key, recomputed: set_dropout_context must not
  // change between a forward and its backward.
  if (dx != nullptr)
    dropout_apply(ctx_, dy, dx, batch * input_shape().numel(), key(), last_training_ ? p_ : 0.0f,
                  nhwc_channels_, nhwc_hw_);
}

void DropoutLayer::forward_stored(const std::vector<BufferView>& xs, BufferView y, std::size_t,
                                  bool training) {
  dropout_apply(ctx_, xs.at(0), y, key(), training ? p_ : 0.0f, nhwc_channels_, nhwc_hw_);
  last_training_ = training;
}

void DropoutLayer::backward_stored(const std::vector<BufferView>&, BufferView, BufferView dy,
                                   const std::vector<BufferView>& dxs, std::size_t, bool) {
  if (dxs.at(0).ptr != nullptr)
    dropout_apply(ctx_, dy, dxs[0], key(), last_training_ ? p_ : 0.0f, nhwc_channels_, nhwc_hw_);
}

Pool2dLayer::Pool2dLayer(std::string name, const Pool2dGeometry& g, const ComputeContext& ctx,
                         std::size_t max_batch)
    : Layer(std::move(name), Shape{g.channels, g.height, g.width},
            (g.validate(), Shape{g.channels, g.out_height(), g.out_width()})),
      op_(ctx, g, max_batch) {}

void Pool2dLayer::forward(const float* x, float* y, std::size_t batch, bool) {
  op_.forward(x, y, batch);
}
void Pool2dLayer::backward(const float* x, const float* y, const float* dy, float* dx,
                           std::size_t batch, bool) {
  if (dx != nullptr) op_.backward(x, y, dy, dx, batch);
}

void Pool2dLayer::forward_stored(const std::vector<BufferView>& xs, BufferView y, std::size_t batch,
                                 bool) {
  op_.forward(xs.at(0), y, batch);
}
void Pool2dLayer::backward_stored(const std::vector<BufferView>&, BufferView, BufferView dy,
                                  const std::vector<BufferView>& dxs, std::size_t batch, bool) {
  if (dxs.at(0).ptr != nullptr) op_.backward(dy, dxs[0], batch);
}

void GlobalAvgPoolLayer::forward(const float* x, float* y, std::size_t batch, bool training) {
  const Shape& in = input_shape();
  forward_stored({view_of(x, batch * in.numel(), ctx_.device())},
                 view_of(y, batch * in[0], ctx_.device()), batch, training);
}

void GlobalAvgPoolLayer::backward(const float*, const float*, const float* dy, float* dx,
                                  std::size_t batch, bool) {
  if (dx == nullptr) return;
  const Shape& in = input_shape();
  global_avg_pool_backward(ctx_, view_of(dy, batch * in[0], ctx_.device()),
                           view_of(dx, batch * in.numel(), ctx_.device()), batch, in[0],
                           in[1] * in[2], layout_);
}

void GlobalAvgPoolLayer::forward_stored(const std::vector<BufferView>& xs, BufferView y,
                                        std::size_t batch, bool) {
  const Shape& in = input_shape();
  global_avg_pool_forward(ctx_, xs.at(0), y, batch, in[0], in[1] * in[2], layout_);
}

void GlobalAvgPoolLayer::backward_stored(const std::vector<BufferView>&, BufferView, BufferView dy,
                                         const std::vector<BufferView>& dxs, std::size_t batch,
                                         bool) {
  if (dxs.at(0).ptr == nullptr) return;
  const Shape& in = input_shape();
  global_avg_pool_backward(ctx_, dy, dxs[0], batch, in[0], in[1] * in[2], layout_);
}

}  // namespace ringtrain
