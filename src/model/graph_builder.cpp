#include "ringtrain/model/graph_builder.h"

#include <fmt/format.h>

namespace ringtrain {

std::string GraphBuilder::node(LayerSpec layer, std::vector<std::string> inputs, std::string name) {
  if (name.empty()) name = fmt::format("n{}", ++auto_names_);
  // The previous node (the model's input for the first) is read implicitly;
  // name it only when it is not, as a block of the text language expands.
  if (inputs.size() == 1 && inputs[0] == last_) inputs.clear();
  layer.name = name;
  layer.inputs = std::move(inputs);
  spec_.layers.push_back(std::move(layer));
  last_ = name;
  return name;
}

std::string GraphBuilder::conv2d(std::size_t out, std::size_t kernel, std::size_t stride,
                                 std::size_t padding, bool bias, std::string name,
                                 std::vector<std::string> inputs) {
  LayerSpec l;
  l.kind = LayerKind::conv2d;
  l.out = out;
  l.kernel = kernel;
  l.stride = stride;
  l.padding = padding;
  l.bias = bias;
  return node(l, std::move(inputs), std::move(name));
}

std::string GraphBuilder::batch_norm(std::string name, bool zero_init,
                                     std::vector<std::string> inputs) {
  LayerSpec l;
  l.kind = LayerKind::batch_norm;
  l.zero_init = zero_init;
  return node(l, std::move(inputs), std::move(name));
}

std::string GraphBuilder::relu(std::string name, std::vector<std::string> inputs) {
  return node(LayerSpec{LayerKind::relu}, std::move(inputs), std::move(name));
}

std::string GraphBuilder::max_pool2d(std::size_t kernel, std::size_t stride, std::size_t padding,
                                     std::string name) {
  LayerSpec l;
  l.kind = LayerKind::max_pool2d;
  l.kernel = kernel;
  l.stride = stride;
  l.padding = padding;
  return node(l, {}, std::move(name));
}

std::string GraphBuilder::avg_pool2d(std::size_t kernel, std::size_t stride, std::size_t padding,
                                     std::string name, std::vector<std::string> inputs) {
  LayerSpec l;
  l.kind = LayerKind::avg_pool2d;
  l.kernel = kernel;
  l.stride = stride;
  l.padding = padding;
  return node(l, std::move(inputs), std::move(name));
}

std::string GraphBuilder::global_avg_pool(std::string name) {
  return node(LayerSpec{LayerKind::global_avg_pool}, {}, std::move(name));
}

std::string GraphBuilder::flatten(std::string name) {
  return node(LayerSpec{LayerKind::flatten}, {}, std::move(name));
}

std::string GraphBuilder::dropout(double p, std::string name) {
  LayerSpec l;
  l.kind = LayerKind::dropout;
  l.p = p;
  return node(l, {}, std::move(name));
}

std::string GraphBuilder::linear(std::size_t out, std::string name) {
  LayerSpec l;
  l.kind = LayerKind::linear;
  l.out = out;
  return node(l, {}, std::move(name));
}

std::string GraphBuilder::add(std::vector<std::string> inputs, std::string name) {
  return node(LayerSpec{LayerKind::add}, std::move(inputs), std::move(name));
}

std::string GraphBuilder::concat(std::vector<std::string> inputs, std::string name) {
  return node(LayerSpec{LayerKind::concat}, std::move(inputs), std::move(name));
}

}  // namespace ringtrain
