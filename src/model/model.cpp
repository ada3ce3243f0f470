// Model: layers over flat parameter and gradient buffers, with every buffer of
// the step (activations, gradient ping-pong, labels, loss workspaces) allocated
// once here, for max_batch.
#include "ringtrain/model/model.h"

#include <algorithm>
#include <map>

#include <fmt/format.h>

#include "kernels/softmax_cross_entropy.cuh"
#include "model/kaiming_init.h"
#include "model/layer.h"
#include "ringtrain/core/buffer_copy.h"
#include "ringtrain/core/check.h"
#include "ringtrain/core/host_sync.h"
#include "ringtrain/ops/compute_context.h"
#include "ringtrain/ops/softmax_cross_entropy.h"
#include "ringtrain/tensor/device_memory.h"
#include "ringtrain/tensor/tensor.h"

namespace ringtrain {

struct Model::State {
  std::unique_ptr<ComputeContext> ctx;
  DropoutContext dropout;
  std::vector<std::unique_ptr<Layer>> layers;
  std::vector<std::pair<std::size_t, std::size_t>>
      layer_ranges;                    // [begin, end) in the flat buffers
  std::vector<bool> needs_input_grad;  // some layer below has parameters
  Tensor params, grads_owned;
  BufferView grads;
  std::vector<Tensor> activations;    // output of each non-view layer, max_batch rows
  std::vector<const float*> outputs;  // output pointer of each layer (views share)
  Tensor grad_a, grad_b;              // backward ping-pong, max activation size
  Tensor labels;                      // copy of the last forward's labels
  Tensor row_loss, row_correct;       // GPU loss workspaces
  Tensor loss_totals;                 // running [loss sum, correct, bad labels], f64
  const float* last_input = nullptr;
  std::size_t last_batch = 0;
  bool forward_done = false;
};

Model::Model() : state_(std::make_unique<State>()) {}
Model::~Model() = default;

namespace {
std::string layer_base_name(LayerKind kind) {
  switch (kind) {
    case LayerKind::linear:
      return "fc";
    case LayerKind::conv2d:
      return "conv";
    case LayerKind::max_pool2d:
      return "pool";
    default:
      return std::string(layer_kind_name(kind));
  }
}
}  // namespace

std::unique_ptr<Model> Model::build(const ModelSpec& spec,
                                    const std::vector<std::size_t>& input_shape, int num_classes,
                                    const ModelOptions& options) {
  RT_CHECK(!input_shape.empty() && input_shape.size() <= 3,
           "model input shape must be [features] or [channels, height, width], got {} dimensions",
           input_shape.size());
  for (std::size_t d : input_shape)
    RT_CHECK(d > 0, "model input shape [{}] has a zero dimension", fmt::join(input_shape, ", "));
  RT_CHECK(num_classes > 0, "the number of classes must be positive, got {}", num_classes);
  RT_CHECK(options.max_batch > 0, "max_batch must be at least 1");
  RT_CHECK(!spec.layers.empty(), "model spec has no layers");
  Shape shape(input_shape);
  if (!spec.input_shape.empty()) {
    const bool ok = spec.input_shape.size() == 1 ? spec.input_shape[0] == shape.numel()
                                                 : Shape(spec.input_shape) == shape;
    RT_CHECK(ok, "model spec '{}' expects input {} but the data has samples of shape {}",
             spec.to_string(), Shape(spec.input_shape).to_string(), shape.to_string());
  }

  std::unique_ptr<Model> m(new Model());
  m->spec_ = spec;
  m->options_ = options;
  m->input_shape_ = input_shape;
  m->num_classes_ = static_cast<std::size_t>(num_classes);
  State& s = *m->state_;
  s.ctx = ComputeContext::create(options.device, options.tf32);
  s.dropout.seed = options.seed;
  const std::size_t B = options.max_batch;

  // Layers, with names per kind: conv1, relu1, pool1, conv2, ..., fc1, fc2 (a
  // registered type by its own name: layernorm1).
  std::map<std::string, std::size_t> counters;
  std::vector<std::vector<ParamDesc>> descs;
  for (std::size_t i = 0; i < spec.layers.size(); ++i) {
    const LayerSpec& l = spec.layers[i];
    const std::string base = l.kind == LayerKind::custom ? l.type : layer_base_name(l.kind);
    const std::string name = fmt::format("{}{}", base, ++counters[base]);
    s.layers.push_back(make_layer(l, shape, name, i, *s.ctx, B, s.dropout));
    shape = s.layers.back()->output_shape();
    descs.push_back(s.layers.back()->param_descs());
  }
  RT_CHECK(shape.rank() == 1 && shape[0] == m->num_classes_,
           "model spec '{}' ends with outputs of shape {} but the data has {} classes: the last "
           "layer should be linear(out={})",
           spec.to_string(), shape.to_string(), num_classes, num_classes);

  // Flat layout: layer order, and weight before bias inside a layer.
  std::size_t offset = 0;
  bool params_below = false;
  for (std::size_t i = 0; i < s.layers.size(); ++i) {
    const std::size_t begin = offset;
    for (const ParamDesc& d : descs[i]) {
      ParamInfo p;
      p.name = s.layers[i]->name() + "." + d.name;
      p.offset = offset;
      p.count = d.shape.numel();
      p.shape = d.shape.to_vector();
      p.layer = i;
      offset += p.count;
      m->param_info_.push_back(std::move(p));
    }
    s.layer_ranges.emplace_back(begin, offset);
    s.needs_input_grad.push_back(params_below);
    params_below = params_below || offset > begin;
  }
  m->param_count_ = offset;
  const Device dev = options.device;
  s.params = Tensor::empty({offset}, DType::f32, dev);
  s.grads_owned = Tensor::zeros({offset}, DType::f32, dev);
  s.grads = s.grads_owned.buffer();

  // Seeded Kaiming init on the host, then one copy to the device.
  std::vector<float> host(offset);
  std::size_t tensor_index = 0;
  for (std::size_t i = 0; i < s.layers.size(); ++i) {
    std::size_t at = s.layer_ranges[i].first;
    for (const ParamDesc& d : descs[i]) {
      kaiming_normal_fill(host.data() + at, d.shape.numel(), d.fan_in, options.seed,
                          tensor_index++);
      if (d.fan_in == 0) std::fill_n(host.data() + at, d.shape.numel(), d.constant);
      at += d.shape.numel();
    }
  }
  s.params.copy_from(Tensor::borrow(host.data(), {offset}, DType::f32, Device::cpu()));
  for (std::size_t i = 0; i < s.layers.size(); ++i)
    s.layers[i]->bind(s.params.data_as<float>() + s.layer_ranges[i].first,
                      static_cast<float*>(s.grads.ptr) + s.layer_ranges[i].first);

  // Activations: one buffer per layer that is not a view; the largest
  // per-layer activation sizes the gradient ping-pong.
  std::size_t largest = shape.numel();
  s.activations.resize(s.layers.size());
  for (std::size_t i = 0; i < s.layers.size(); ++i) {
    const std::size_t n = s.layers[i]->output_shape().numel();
    largest = std::max(largest, n);
    if (!s.layers[i]->is_view()) s.activations[i] = Tensor::empty({B * n}, DType::f32, dev);
  }
  s.grad_a = Tensor::empty({B * largest}, DType::f32, dev);
  s.grad_b = Tensor::empty({B * largest}, DType::f32, dev);
  s.labels = Tensor::empty({B}, DType::i32, dev);
  if (dev.is_cuda()) {
    s.row_loss = Tensor::empty({B}, DType::f32, dev);
    s.row_correct = Tensor::empty({B}, DType::i32, dev);
  }
  s.loss_totals = Tensor::empty({kernels::kLossTotalsCount}, DType::f64, dev);
  device_zero(s.loss_totals.data(), s.loss_totals.buffer().bytes(), dev);
  s.outputs.assign(s.layers.size(), nullptr);
  return m;
}

BufferView Model::params() {
  return state_->params.buffer();
}
BufferView Model::grads() {
  return state_->grads;
}
std::size_t Model::layer_count() const {
  return state_->layers.size();
}
std::string Model::layer_name(std::size_t layer) const {
  RT_CHECK(layer < layer_count(), "layer {} out of range (the model has {})", layer, layer_count());
  return state_->layers[layer]->name();
}
std::vector<std::size_t> Model::layer_output_shape(std::size_t layer) const {
  RT_CHECK(layer < layer_count(), "layer {} out of range (the model has {})", layer, layer_count());
  return state_->layers[layer]->output_shape().to_vector();
}

std::pair<std::size_t, std::size_t> Model::layer_param_range(std::size_t layer) const {
  RT_CHECK(layer < layer_count(), "layer {} out of range (the model has {})", layer, layer_count());
  return state_->layer_ranges[layer];
}

std::string Model::summary() const {
  std::string out = fmt::format("{:<4} {:<10} {:<18} {:>10}\n", "#", "layer", "output", "params");
  for (std::size_t i = 0; i < layer_count(); ++i) {
    const auto [b, e] = state_->layer_ranges[i];
    out += fmt::format("{:<4} {:<10} {:<18} {:>10}\n", i, state_->layers[i]->name(),
                       state_->layers[i]->output_shape().to_string(), e - b);
  }
  out += fmt::format("total parameters: {}  (spec hash {:016x})\n", param_count_, spec_.hash());
  return out;
}

void Model::bind_gradient_buffer(BufferView grads) {
  RT_CHECK(grads.dtype == DType::f32, "gradient buffer must be f32, got {}",
           dtype_name(grads.dtype));
  RT_CHECK(grads.count == param_count_,
           "gradient buffer has {} elements but the model has {} parameters", grads.count,
           param_count_);
  RT_CHECK(grads.device == options_.device, "gradient buffer is on {} but the model is on {}",
           device_name(grads.device), device_name(options_.device));
  RT_CHECK(grads.ptr != nullptr || param_count_ == 0, "gradient buffer is null");
  State& s = *state_;
  s.grads = grads;
  for (std::size_t i = 0; i < s.layers.size(); ++i)
    s.layers[i]->bind(s.params.data_as<float>() + s.layer_ranges[i].first,
                      static_cast<float*>(grads.ptr) + s.layer_ranges[i].first);
  s.grads_owned = Tensor();
}

void Model::set_dropout_context(std::uint64_t rank, std::uint64_t step) {
  state_->dropout.rank = rank;
  state_->dropout.step = step;
}

const float* Model::run_layers(const float* x, const std::int32_t* labels, std::size_t batch,
                               bool training) {
  State& s = *state_;
  RT_CHECK(batch <= options_.max_batch, "batch {} exceeds the model's max_batch {}", batch,
           options_.max_batch);
  const float* in = x;
  for (std::size_t i = 0; i < s.layers.size(); ++i) {
    float* out =
        s.layers[i]->is_view() ? const_cast<float*>(in) : s.activations[i].data_as<float>();
    if (batch > 0) s.layers[i]->forward(in, out, batch, training);
    s.outputs[i] = out;
    in = out;
  }
  s.last_input = x;
  s.last_batch = batch;
  s.forward_done = true;
  if (batch > 0) copy_view(s.labels.buffer(), view_of(labels, batch, options_.device));
  return in;
}

Model::LossResult Model::forward(const float* x, const std::int32_t* labels, std::size_t batch,
                                 bool training) {
  State& s = *state_;
  const float* logits = run_layers(x, labels, batch, training);
  if (batch == 0) return {};
  if (options_.device.is_cuda()) host_sync::note(options_.device, "model: read the loss");
  const SoftmaxCrossEntropyResult r = softmax_cross_entropy_forward(
      *s.ctx, logits, s.labels.data_as<std::int32_t>(), batch, num_classes_,
      s.row_loss.data_as<float>(), s.row_correct.data_as<std::int32_t>());
  return {r.loss_sum, r.correct};
}

void Model::forward_accumulate(const float* x, const std::int32_t* labels, std::size_t batch,
                               bool training) {
  State& s = *state_;
  const float* logits = run_layers(x, labels, batch, training);
  softmax_cross_entropy_accumulate(*s.ctx, logits, s.labels.data_as<std::int32_t>(), batch,
                                   num_classes_, s.row_loss.data_as<float>(),
                                   s.row_correct.data_as<std::int32_t>(),
                                   s.loss_totals.data_as<double>());
}

Model::LossResult Model::take_loss_totals() {
  State& s = *state_;
  double totals[kernels::kLossTotalsCount] = {};
  // One counted host sync: on a GPU the copy (on the default stream, behind
  // the model's blocking stream) waits for every queued forward and counts
  // itself; on the CPU the same point is counted here, so both paths report
  // the same number.
  if (options_.device.is_cpu()) host_sync::note(options_.device, "model: read the loss totals");
  copy_view(view_of(totals, kernels::kLossTotalsCount), s.loss_totals.buffer());
  device_zero(s.loss_totals.data(), sizeof(totals), options_.device);
  RT_CHECK(totals[2] == 0,
           "{} sample(s) since the last loss read had a label outside [0, {}): the labels do not "
           "match the "
           "model's {} classes",
           static_cast<std::uint64_t>(totals[2]), num_classes_, num_classes_);
  return {totals[0], static_cast<std::size_t>(totals[1])};
}

void Model::backward(float grad_scale, bool accumulate,
                     const std::function<void(std::size_t layer)>& on_layer_ready) {
  State& s = *state_;
  RT_CHECK(s.forward_done, "backward called without a forward");
  const std::size_t batch = s.last_batch;
  const std::size_t L = s.layers.size();
  if (batch == 0) {
    if (!accumulate) zero_grads();
    for (std::size_t i = L; i-- > 0;)
      if (on_layer_ready) on_layer_ready(i);
    return;
  }
  float* dy = s.grad_a.data_as<float>();
  float* spare = s.grad_b.data_as<float>();
  softmax_cross_entropy_backward(*s.ctx, s.outputs[L - 1], s.labels.data_as<std::int32_t>(), batch,
                                 num_classes_, grad_scale / static_cast<float>(batch), dy);
  for (std::size_t i = L; i-- > 0;) {
    Layer& layer = *s.layers[i];
    const float* x = i == 0 ? s.last_input : s.outputs[i - 1];
    if (layer.is_view()) {
      // dx is dy under another shape: nothing to do.
    } else {
      float* dx = s.needs_input_grad[i] ? spare : nullptr;
      const bool has_params = s.layer_ranges[i].second > s.layer_ranges[i].first;
      // A layer with no parameters and no consumer of its dx has nothing to do.
      if (dx != nullptr || has_params) layer.backward(x, s.outputs[i], dy, dx, batch, accumulate);
      if (dx != nullptr) std::swap(dy, spare);
    }
    if (on_layer_ready) on_layer_ready(i);
  }
}

const float* Model::logits() const {
  RT_CHECK(state_->forward_done, "logits() called before any forward");
  return state_->outputs.back();
}

void Model::zero_grads() {
  device_zero(state_->grads.ptr, state_->grads.bytes(), options_.device);
}

BufferView Model::loss_totals_view() const {
  return state_->loss_totals.buffer();
}

void* Model::compute_stream() const {
  return state_->ctx->stream();
}
void Model::synchronize() const {
  state_->ctx->synchronize();
}

}  // namespace ringtrain
