#include "model/merge_layers.h"

#include "ringtrain/core/check.h"
#include "ringtrain/ops/merge.h"

namespace ringtrain {

namespace {
Shape concat_shape(const std::vector<Shape>& inputs) {
  RT_CHECK(inputs.size() >= 2, "concat needs at least two inputs, got {}", inputs.size());
  const Shape& first = inputs[0];
  std::size_t channels = 0;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    const Shape& s = inputs[i];
    const bool fits = s.rank() == first.rank() &&
                      (s.rank() == 1 || (s.rank() == 3 && s[1] == first[1] && s[2] == first[2]));
    RT_CHECK(fits,
             "concat: input {} has shape {} but input 0 has {}: inputs must agree in every "
             "dimension but the first (channels)",
             i, s.to_string(), first.to_string());
    channels += s[0];
  }
  return first.rank() == 1 ? Shape{channels} : Shape{channels, first[1], first[2]};
}

Shape add_shape(const std::vector<Shape>& inputs) {
  RT_CHECK(inputs.size() >= 2, "add needs at least two inputs, got {}", inputs.size());
  for (std::size_t i = 1; i < inputs.size(); ++i)
    RT_CHECK(inputs[i] == inputs[0], "add: input {} has shape {} but input 0 has {}", i,
             inputs[i].to_string(), inputs[0].to_string());
  return inputs[0];
}

[[noreturn]] void one_input(const std::string& name) {
  RT_CHECK(false, "layer '{}' takes several inputs: the model calls forward_many", name);
  __builtin_unreachable();
}
}  // namespace

AddLayer::AddLayer(std::string name, const std::vector<Shape>& inputs, float scale,
                   const ComputeContext& ctx)
    : Layer(std::move(name), inputs.at(0), add_shape(inputs)),
      ctx_(ctx),
      inputs_(inputs.size()),
      scale_(scale) {}

void AddLayer::forward(const float*, float*, std::size_t, bool) {
  one_input(name());
}
void AddLayer::backward(const float*, const float*, const float*, float*, std::size_t, bool) {
  one_input(name());
}

void AddLayer::forward_many(const std::vector<const float*>& xs, float* y, std::size_t batch,
                            bool) {
  const std::size_t n = batch * output_shape().numel();
  if (xs.size() == 2) return sum_two_stored(ctx_, y, xs[0], xs[1], scale_, n);
  copy_floats(ctx_, y, xs[0], n);
  for (std::size_t k = 1; k < xs.size(); ++k) add_scaled(ctx_, y, xs[k], scale_, n);
}

void AddLayer::backward_many(const std::vector<const float*>&, const float*, const float* dy,
                             const std::vector<float*>& dxs, std::size_t batch, bool) {
  const std::size_t n = batch * output_shape().numel();
  for (std::size_t k = 0; k < dxs.size(); ++k) {
    if (dxs[k] == nullptr) continue;
    copy_floats(ctx_, dxs[k], dy, n);
    if (k > 0) scale_floats(ctx_, dxs[k], n, scale_);
  }
}

void AddLayer::forward_stored(const std::vector<BufferView>& xs, BufferView y, std::size_t, bool) {
  sum_two_stored(ctx_, y, xs.at(0), xs.at(1), scale_);
}

void AddLayer::backward_stored(const std::vector<BufferView>&, BufferView, BufferView dy,
                               const std::vector<BufferView>& dxs, std::size_t, bool) {
  for (std::size_t k = 0; k < dxs.size(); ++k)
    if (dxs[k].ptr != nullptr) scale_stored(ctx_, dxs[k], dy, k == 0 ? 1.0f : scale_);
}

ConcatLayer::ConcatLayer(std::string name, const std::vector<Shape>& inputs,
                         const ComputeContext& ctx, Layout layout)
    : Layer(std::move(name), inputs.at(0), concat_shape(inputs)), ctx_(ctx) {
  const bool nhwc = layout == Layout::nhwc && inputs[0].rank() == 3;
  if (nhwc) blocks_per_sample_ = inputs[0][1] * inputs[0][2];
  for (const Shape& s : inputs) {
    const std::size_t block = nhwc ? s[0] : s.numel();
    sizes_.push_back(block);
    total_ += block;
  }
}

void ConcatLayer::forward(const float*, float*, std::size_t, bool) {
  one_input(name());
}
void ConcatLayer::backward(const float*, const float*, const float*, float*, std::size_t, bool) {
  one_input(name());
}

// Per sample (per pixel channels-last), input k's block sits at its offset in the output's.
void ConcatLayer::forward_many(const std::vector<const float*>& xs, float* y, std::size_t batch,
                               bool training) {
  const Device d = ctx_.device();
  std::vector<BufferView> views;
  for (std::size_t k = 0; k < xs.size(); ++k)
    views.push_back(view_of(xs[k], batch * blocks_per_sample_ * sizes_[k], d));
  forward_stored(views, view_of(y, batch * blocks_per_sample_ * total_, d), batch, training);
}

void ConcatLayer::backward_many(const std::vector<const float*>&, const float*, const float* dy,
                                const std::vector<float*>& dxs, std::size_t batch, bool) {
  const Device d = ctx_.device();
  std::vector<BufferView> views;
  for (std::size_t k = 0; k < dxs.size(); ++k)
    views.push_back(
        view_of(dxs[k], dxs[k] != nullptr ? batch * blocks_per_sample_ * sizes_[k] : 0, d));
  backward_stored({}, {}, view_of(dy, batch * blocks_per_sample_ * total_, d), views, batch, false);
}

void ConcatLayer::forward_stored(const std::vector<BufferView>& xs, BufferView y, std::size_t batch,
                                 bool) {
  std::size_t offset = 0;
  for (std::size_t k = 0; k < xs.size(); ++k) {
    copy_blocks(ctx_, y.slice(offset, y.count - offset), total_, xs[k], sizes_[k], sizes_[k],
                batch * blocks_per_sample_);
    offset += sizes_[k];
  }
}

void ConcatLayer::backward_stored(const std::vector<BufferView>&, BufferView, BufferView dy,
                                  const std::vector<BufferView>& dxs, std::size_t batch, bool) {
  std::size_t offset = 0;
  for (std::size_t k = 0; k < dxs.size(); ++k) {
    if (dxs[k].ptr != nullptr)
      copy_blocks(ctx_, dxs[k], sizes_[k], dy.slice(offset, dy.count - offset), total_, sizes_[k],
                  batch * blocks_per_sample_);
    offset += sizes_[k];
  }
}

}  // namespace ringtrain
