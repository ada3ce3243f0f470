// What a model is, as users write it: a preset or a graph of layers. The loss
// (softmax cross-entropy with mean reduction) is implied after the last node.
//
// A graph is a list of nodes in order; each node is a layer applied to the
// previous node, or to the earlier nodes it names:
//     a = conv2d(out=64, kernel=3, padding=1, bias=0)   # named 'a', reads the previous node
//     b = batch_norm(a)
//     y = add(b, input)                                 # 'input' is the model's input
// A node read by several nodes gets the sum of their gradients. A plain list
// (no names) is the special case where each node reads the previous one.
//
//   mlp:784-512-512-10     input 784, hidden layers 512 and 512 with ReLU,
//                          10 classes (the first number is the input size)
//   cnn                    2 conv + pool + 2 FC for 1x28x28 input, under 500k
//                          parameters (see cnn_preset_text())
//   resnet18 ... vgg16_bn  the graph presets of ringtrain/model/presets.h
//   @path/to/model.txt     a layer list read from a file
//   a layer list           items separated by ';' or newlines, '#' comments:
//     input(1, 28, 28)                       optional: the expected input shape
//     conv2d(out=32, kernel=3, stride=1, padding=1)   (or conv2d(32, 3, ...));
//     kernel, stride and padding take HxW for two sizes: kernel=1x7, padding=0x3
//     max_pool2d(kernel=2, stride=2)         stride defaults to kernel
//     linear(out=128)  relu  gelu  flatten  dropout(p=0.5)
//     max_pool2d(kernel=3, stride=2, padding=1)  avg_pool2d(kernel=3, stride=1, padding=1)
//     global_avg_pool                        [C, H, W] -> [C]
//     batch_norm(eps=1e-5, momentum=0.1, affine=1, zero_init=0)
//     add(a, b, ..., scale=1)                a + scale * (b + ...)
//     concat(a, b, ...)                      along channels
//     token_embedding(vocab=256, dim=128)   [T] token ids -> [T, dim]
//     position_embedding(context=128)        [T, C] + learned rows, T <= context
//     layer_norm(eps=1e-5)  causal_self_attention(heads=4)  gelu_tanh
//     lm_head(tied=wte)                      [T, C] -> [T, vocab] with wte's weight
//     (linear over [T, C] acts on each row; the loss is then per token)
//     any registered layer type, e.g. layernorm or layernorm(eps=1e-5)
//     (ringtrain/model/layer_registry.h; `ringtrain train --plugin lib.so`)
//
// A block is defined once and applied like a layer; `repeat` repeats
// statements (docs/models.md has the whole language):
//     block basic(planes, stride=1) {         # parameters, with defaults
//       conv1 = conv2d(out=planes, kernel=3, stride=stride, padding=1, bias=0)
//       bn1 = batch_norm; relu1 = relu
//       conv2 = conv2d(out=planes, kernel=3, padding=1, bias=0)   # (out=planes*4: a product)
//       sum = add(conv2, input)              # 'input': the block's input
//       relu = relu                          # the last node: the block's output
//     }
//     layer1.0 = basic(x, planes=16)         # nodes layer1.0.conv1, ...; 'layer1.0'
//                                            # reads the block's last node
//     repeat i = 1..2 { layer1.{i} = basic(planes=16) }   # {i}: a parameter in a name
//     repeat 3 { relu }                      # i from 0, unused here
//
// to_string() is a canonical layer list that parses back to an equal spec, and
// hash() is FNV-1a over it: the signature ranks compare at start-up. Blocks and
// repeats are expanded there: the canonical text is the graph that is built,
// so that the same graph has one text and one hash however it was written (a
// preset, the builder, blocks or a flat list).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ringtrain {

// `custom`: a layer type registered at run time (LayerSpec::type names it).
enum class LayerKind {
  linear,
  conv2d,
  max_pool2d,
  relu,
  gelu,
  flatten,
  dropout,
  custom,
  avg_pool2d,
  global_avg_pool,
  batch_norm,
  add,
  concat,
  // A GPT-2 class language model's layers (src/model/token_embedding_layer.h etc.).
  token_embedding,
  position_embedding,
  layer_norm,
  causal_self_attention,
  gelu_tanh,
  lm_head
};

std::string_view layer_kind_name(LayerKind kind);

struct LayerSpec {
  LayerKind kind = LayerKind::relu;
  std::size_t out = 0;      // linear: output features; conv2d: output channels
  std::size_t kernel = 0;   // conv2d, max_pool2d, avg_pool2d
  std::size_t stride = 0;   // conv2d (default 1), pools (default kernel)
  std::size_t padding = 0;  // conv2d, pools
  // conv2d along the width, when it differs from the height (kernel=1x7,
  // padding=0x3: Inception's factorised convolutions); kSquare: the same.
  static constexpr std::size_t kSquare = static_cast<std::size_t>(-1);
  std::size_t kernel_w = kSquare, stride_w = kSquare, padding_w = kSquare;
  double p = 0;             // dropout probability, in [0, 1)
  bool bias = true;         // conv2d: with a bias term
  double eps = 1e-5;        // batch_norm
  double momentum = 0.1;    // batch_norm: running = (1 - momentum) running + momentum batch
  bool affine = true;       // batch_norm: learnable scale and shift
  bool zero_init = false;   // batch_norm: the scale starts at 0 (last BN of a residual branch)
  double scale = 1.0;       // add: a + scale * (b + ...)
  std::size_t vocab = 0;    // token_embedding: vocabulary size (its dim is `out`)
  std::size_t context = 0;  // position_embedding: the most positions
  std::size_t heads = 0;    // causal_self_attention
  std::string tied{};       // lm_head: the token_embedding node whose weight it uses
  std::string name{};       // the node's name; empty: an automatic one (conv1, relu2, ...)
  // Earlier nodes read, by name ("input": the model's input); empty: the previous node.
  std::vector<std::string> inputs{};
  std::string type{};  // custom: the registered type's name
  // custom: the arguments given, as written, in the order the type declares.
  std::vector<std::pair<std::string, std::string>> args{};

  // canonical: "conv2d(out=32, kernel=3, stride=1, padding=1)", "y = add(a, b)"
  std::string to_string() const;
  bool operator==(const LayerSpec&) const = default;
};

struct ModelSpec {
  // Expected per-sample input shape; empty accepts any. A single dimension is
  // compared with the input's element count (so mlp:784-... takes 1x28x28).
  std::vector<std::size_t> input_shape;
  std::vector<LayerSpec> layers;  // the nodes, in order (inputs name earlier nodes)
  // A graph preset (ringtrain/model/presets.h) by name: `layers` is its graph
  // for 1000 classes, and Model::build makes it for the data's class count;
  // to_string() is the name.
  std::string preset{};
  // Where each node was written ("3:5", and the block calls it came from), for
  // the messages of Model::build; not part of the spec's value (==, to_string).
  std::vector<std::string> origins{};
  // The file the spec was read from ("@myres.txt"), for messages; not part of
  // the spec's value either.
  std::string source{};

  // A preset, "@file", or a layer list. Throws Error naming the bad token and
  // its line:column.
  static ModelSpec parse(std::string_view text_or_preset_or_file);
  std::string to_string() const;  // canonical layer list, one line, ';' separated
  // For messages: the preset's name, the file ("@myres.txt"), else the layer
  // list, cut after 60 characters (never a screenful of expanded blocks).
  std::string describe() const;
  std::uint64_t hash() const;               // FNV-1a 64 of to_string(): stable across builds
  bool operator==(const ModelSpec&) const;  // the graph: input shape, nodes, preset
};

// Whether `name` is a built-in layer kind (or an accepted spelling of one, or
// "input"): registered types may not take these names.
bool is_builtin_layer_name(std::string_view name);

// The layer list that the `cnn` preset stands for.
std::string_view cnn_preset_text();
// One line per preset and format, for --help texts.
std::string_view model_spec_help();

}  // namespace ringtrain
