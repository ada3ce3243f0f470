// What a model is, as users write it: a preset or a list of layers. The loss
// (softmax cross-entropy with mean reduction) is implied after the last layer.
//
//   mlp:784-512-512-10     input 784, hidden layers 512 and 512 with ReLU,
//                          10 classes (the first number is the input size)
//   cnn                    2 conv + pool + 2 FC for 1x28x28 input, under 500k
//                          parameters (see cnn_preset_text())
//   @path/to/model.txt     a layer list read from a file
//   a layer list           items separated by ';' or newlines, '#' comments:
//     input(1, 28, 28)                       optional: the expected input shape
//     conv2d(out=32, kernel=3, stride=1, padding=1)   (or conv2d(32, 3, ...))
//     max_pool2d(kernel=2, stride=2)         stride defaults to kernel
//     linear(out=128)  relu  gelu  flatten  dropout(p=0.5)
//     any registered layer type, e.g. layernorm or layernorm(eps=1e-5)
//     (ringtrain/model/layer_registry.h; `ringtrain train --plugin lib.so`)
//
// to_string() is a canonical layer list that parses back to an equal spec, and
// hash() is FNV-1a over it: the signature ranks compare at start-up.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ringtrain {

// `custom`: a layer type registered at run time (LayerSpec::type names it).
enum class LayerKind { linear, conv2d, max_pool2d, relu, gelu, flatten, dropout, custom };

std::string_view layer_kind_name(LayerKind kind);

struct LayerSpec {
  LayerKind kind = LayerKind::relu;
  std::size_t out = 0;      // linear: output features; conv2d: output channels
  std::size_t kernel = 0;   // conv2d, max_pool2d
  std::size_t stride = 0;   // conv2d (default 1), max_pool2d (default kernel)
  std::size_t padding = 0;  // conv2d
  double p = 0;             // dropout probability, in [0, 1)
  std::string type{};       // custom: the registered type's name
  // custom: the arguments given, as written, in the order the type declares.
  std::vector<std::pair<std::string, std::string>> args{};

  std::string to_string() const;  // canonical: "conv2d(out=32, kernel=3, stride=1, padding=1)"
  bool operator==(const LayerSpec&) const = default;
};

struct ModelSpec {
  // Expected per-sample input shape; empty accepts any. A single dimension is
  // compared with the input's element count (so mlp:784-... takes 1x28x28).
  std::vector<std::size_t> input_shape;
  std::vector<LayerSpec> layers;

  // A preset, "@file", or a layer list. Throws Error naming the bad token and
  // its line:column.
  static ModelSpec parse(std::string_view text_or_preset_or_file);
  std::string to_string() const;  // canonical layer list, one line, ';' separated
  std::uint64_t hash() const;     // FNV-1a 64 of to_string(): stable across builds
  bool operator==(const ModelSpec&) const = default;
};

// Whether `name` is a built-in layer kind (or an accepted spelling of one, or
// "input"): registered types may not take these names.
bool is_builtin_layer_name(std::string_view name);

// The layer list that the `cnn` preset stands for.
std::string_view cnn_preset_text();
// One line per preset and format, for --help texts.
std::string_view model_spec_help();

}  // namespace ringtrain
