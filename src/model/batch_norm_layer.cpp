#include "model/batch_norm_layer.h"

#include "ringtrain/core/check.h"
#include "ringtrain/ops/batch_norm_relu.h"

namespace ringtrain {

namespace {
BatchNormShape bn_shape(const Shape& input, Layout layout) {
  RT_CHECK(input.rank() == 1 || input.rank() == 3,
           "batch_norm needs [features] or [channels, height, width], got {}", input.to_string());
  return input.rank() == 1 || layout == Layout::nhwc
             ? BatchNormShape{input[0], 1}
             : BatchNormShape{input[0], input[1] * input[2]};
}
}  // namespace

BatchNormLayer::BatchNormLayer(std::string name, const Shape& input, const LayerSpec& spec,
                               const ComputeContext& ctx, Layout layout)
    : Layer(std::move(name), input, input),
      ctx_(ctx),
      shape_(bn_shape(input, layout)),
      rows_per_sample_(input.rank() == 3 && layout == Layout::nhwc ? input[1] * input[2] : 1),
      eps_(static_cast<float>(spec.eps)),
      momentum_(static_cast<float>(spec.momentum)),
      affine_(spec.affine),
      zero_init_(spec.zero_init) {
  const std::size_t C = shape_.channels;
  mean_ = Tensor::zeros({C}, DType::f32, ctx.device());
  invstd_ = Tensor::zeros({C}, DType::f32, ctx.device());
  sums_ = Tensor::zeros({2 * C + 1}, DType::f32, ctx.device());
  saved_ = {mean_.data_as<float>(), invstd_.data_as<float>(), sums_.data_as<float>()};
}

std::vector<ParamDesc> BatchNormLayer::param_descs() const {
  if (!affine_) return {};
  const Shape c{shape_.channels};
  return {{"weight", c, 0, zero_init_ ? 0.0f : 1.0f}, {"bias", c, 0, 0.0f}};
}

std::vector<ParamDesc> BatchNormLayer::buffer_descs() const {
  const Shape c{shape_.channels};
  return {{"running_mean", c, 0, 0.0f}, {"running_var", c, 0, 1.0f}};
}

void BatchNormLayer::bind(float* params, float* grads) {
  if (!affine_) return;
  gamma_ = params;
  beta_ = params + shape_.channels;
  dgamma_ = grads;
  dbeta_ = grads + shape_.channels;
}

void BatchNormLayer::bind_buffers(float* buffers) {
  running_mean_ = buffers;
  running_var_ = buffers + shape_.channels;
}

void BatchNormLayer::forward(const float* x, float* y, std::size_t batch, bool training) {
  batch_norm_forward(ctx_, shape_, x, y, batch * rows_per_sample_, training, training, eps_,
                     momentum_, gamma_, beta_, running_mean_, running_var_, saved_, sync_);
}

void BatchNormLayer::backward(const float* x, const float*, const float* dy, float* dx,
                              std::size_t batch, bool accumulate) {
  batch_norm_backward(ctx_, shape_, x, dy, dx, batch * rows_per_sample_, gamma_, saved_, dgamma_,
                      dbeta_, accumulate, sync_);
}

void BatchNormLayer::forward_stored(const std::vector<BufferView>& xs, BufferView y,
                                    std::size_t batch, bool training) {
  batch_norm_forward(ctx_, shape_, xs.at(0), y, batch * rows_per_sample_, training, training, eps_,
                     momentum_, gamma_, beta_, running_mean_, running_var_, saved_, sync_);
}

void BatchNormLayer::backward_stored(const std::vector<BufferView>& xs, BufferView, BufferView dy,
                                     const std::vector<BufferView>& dxs, std::size_t batch,
                                     bool accumulate) {
  batch_norm_backward(ctx_, shape_, xs.at(0), dy, dxs.at(0), batch * rows_per_sample_, gamma_,
                      saved_, dgamma_, dbeta_, accumulate, sync_);
}

void BatchNormLayer::forward_relu(BufferView x, BufferView residual, BufferView y,
                                  std::size_t batch, bool training) {
  batch_norm_relu_forward(ctx_, shape_, x, residual, y, batch * rows_per_sample_, training,
                          training, eps_, momentum_, gamma_, beta_, running_mean_, running_var_,
                          saved_, sync_);
}

void BatchNormLayer::backward_relu(BufferView x, BufferView y, BufferView dy, BufferView dx,
                                   BufferView d_residual, std::size_t batch, bool accumulate,
                                   BufferView dy_addend) {
  batch_norm_relu_backward(ctx_, shape_, x, y, dy, dx, d_residual, batch * rows_per_sample_, gamma_,
                           beta_, saved_, dgamma_, dbeta_, accumulate, sync_, dy_addend);
}

}  // namespace ringtrain
