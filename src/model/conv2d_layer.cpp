// Conv2d: weight [out, in, k, k] and (optionally) bias [out], as PyTorch lays them out.
#include "model/conv2d_layer.h"

#include "ringtrain/ops/bias_relu.h"
#include "ringtrain/ops/precision.h"

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
      ctx_(ctx),
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

// ---- fused with the relu after it ----------------------------------------
// Where cuDNN reads and writes the 16-bit activations (stores_activations),
// the workspace holds the masked dy in the storage dtype (half as many
// floats). Elsewhere the fp32 forms run, as the model's adapter runs them
// unfused: the workspace holds x widened (`in`, none for an fp32 x), the
// convolution's fp32 output and then the masked dy in fp32 (`out`), and dx
// in fp32 before it is narrowed (`in`); under fp32 storage y and dx take the
// convolution's output directly, and the workspace holds the masked dy alone.
std::size_t Conv2dLayer::relu_workspace_floats() const {
  const std::size_t in = input_shape().numel(), out = output_shape().numel();
  if (op_.stores_activations())
    return (out * dtype_size(ctx_.precision()) + sizeof(float) - 1) / sizeof(float);
  return ctx_.precision() == DType::f32 ? out : 2 * in + out;
}

namespace {
// The bias is per channel: the pixels of NHWC are rows of [N*H*W, C], as in Conv2dOp.
struct BiasShape {
  std::size_t outer, channels, inner;
};
BiasShape bias_shape(const Conv2dGeometry& g, std::size_t batch) {
  const std::size_t hwo = g.out_height() * g.out_width();
  return g.layout == Layout::nhwc ? BiasShape{batch * hwo, g.out_channels, 1}
                                  : BiasShape{batch, g.out_channels, hwo};
}
// x as fp32: itself, or widened into `wide`.
const float* fp32_input(const ComputeContext& ctx, BufferView x, float* wide) {
  if (x.dtype == DType::f32) return x.as<const float>();
  convert_storage(ctx, view_of(wide, x.count, ctx.device()), x);
  return wide;
}
}  // namespace

void Conv2dLayer::forward_relu(BufferView x, BufferView y, std::size_t batch, float* workspace) {
  if (batch == 0) return;
  const BiasShape b = bias_shape(op_.geometry(), batch);
  if (op_.stores_activations()) {  // cuDNN's 16-bit y, then bias + relu in place
    op_.forward(x, w_, nullptr, y, batch);
    bias_relu_into(ctx_, y, y, b_, b.outer, b.channels, b.inner);
    return;
  }
  const std::size_t in = x.dtype == DType::f32 ? 0 : batch * input_shape().numel();
  const float* xs = fp32_input(ctx_, x, workspace);
  const BufferView conv =
      y.dtype == DType::f32 ? y : view_of(workspace + in, y.count, ctx_.device());
  op_.forward(xs, w_, nullptr, conv.as<float>(), batch);
  bias_relu_into(ctx_, y, conv, b_, b.outer, b.channels, b.inner);
}

void Conv2dLayer::backward_relu(BufferView x, BufferView y, BufferView dy, BufferView dx,
                                std::size_t batch, bool accumulate, float* workspace) {
  const BiasShape b = bias_shape(op_.geometry(), batch);
  if (op_.stores_activations()) {
    const BufferView masked{workspace, dy.count, dy.dtype, ctx_.device()};
    relu_mask_bias_grad(ctx_, y, dy, masked, db_, b.outer, b.channels, b.inner, accumulate);
    op_.backward(x, w_, masked, dx, dw_, nullptr, batch, accumulate);
    return;
  }
  const std::size_t in = x.dtype == DType::f32 ? 0 : batch * input_shape().numel();
  const BufferView masked = view_of(workspace + in, dy.count, ctx_.device());
  relu_mask_bias_grad(ctx_, y, dy, masked, db_, b.outer, b.channels, b.inner, accumulate);
  const float* xs = fp32_input(ctx_, x, workspace);
  // dx in fp32 (on the storage grid: the op rounds it), narrowed as the adapter narrows it.
  float* dx_wide = dx.ptr == nullptr        ? nullptr
                   : dx.dtype == DType::f32 ? dx.as<float>()
                                            : workspace + in + dy.count;
  op_.backward(xs, w_, masked.as<const float>(), dx_wide, dw_, nullptr, batch, accumulate);
  if (dx_wide != nullptr && dx.dtype != DType::f32)
    convert_storage(ctx_, dx, view_of(dx_wide, dx.count, ctx_.device()));
}

}  // namespace ringtrain
