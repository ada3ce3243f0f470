// Every layer type a model spec can name, the built-in ones (linear, conv2d,
// batch_norm, ...: src/model/builtin_layers.cpp, one table row each) and the
// ones a program or a plugin adds, in one registry: a spec names a type
// (`layernorm`, `layernorm(eps=1e-5)`), and Model::build makes it through the
// type's factory. Register from your own program before parsing the spec, or
// from a plugin (ringtrain/model/plugin.h) that `ringtrain train --plugin
// lib.so` loads.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ringtrain/model/layer.h"
#include "ringtrain/model/model_spec.h"
#include "ringtrain/ops/compute_context.h"
#include "ringtrain/tensor/layout.h"
#include "ringtrain/tensor/shape.h"

namespace ringtrain {

// The arguments a spec gave a registered layer, by the names the type declares.
class LayerArgs {
 public:
  LayerArgs(std::string layer, std::vector<std::pair<std::string, std::string>> values)
      : layer_(std::move(layer)), values_(std::move(values)) {}
  bool has(std::string_view key) const;
  // The value as a number; `fallback` when the spec left it out. Error names
  // the layer, the key and the text when it is not a number.
  double number(std::string_view key, double fallback) const;
  std::size_t count(std::string_view key, std::size_t fallback) const;
  const std::vector<std::pair<std::string, std::string>>& values() const { return values_; }

 private:
  std::string layer_;
  std::vector<std::pair<std::string, std::string>> values_;
};

// What a factory gets besides its arguments.
struct LayerBuild {
  std::string name;           // unique in the model: "layernorm1"
  Shape input;                // per-sample input shape (the first input's)
  std::size_t index = 0;      // position in the spec
  std::size_t max_batch = 0;  // the largest batch forward will see
  const ComputeContext* ctx = nullptr;
  std::vector<Shape> inputs{};              // every input's shape (add, concat: several)
  const LayerSpec* spec = nullptr;          // the node as parsed (typed fields: built-ins)
  const DropoutContext* dropout = nullptr;  // outlives the layer
  // The memory order of [C, H, W] activations, in and out (--layout); only a
  // type with channels_last set is built with nhwc.
  Layout layout = Layout::nchw;
};

// One argument as the spec wrote it, for a type's own checks at parse time.
struct SpecArg {
  std::string value;  // empty: not given
  std::string where;  // "3:14": for messages
};

struct LayerType {
  std::string name;                    // lower case: [a-z][a-z0-9_]*
  std::vector<std::string> arg_names;  // positional order; all optional to the parser
  std::function<std::unique_ptr<Layer>(const LayerArgs&, const LayerBuild&)> make;
  // True when forward/backward accept device pointers on a GPU context;
  // a CPU-only type used on a GPU is an Error when the model is built.
  bool gpu = false;
  // True when the factory honours LayerBuild::layout: the layer reads and
  // writes [C, H, W] activations channels-last when it says nhwc. A type
  // without it fed a [C, H, W] input under --layout nhwc is an Error when the
  // model is built (never a silent misreading of the order).
  bool channels_last = false;
  // True when, on a GPU, the layer's forward and backward do the same work at
  // every step for the same inputs and parameters (no dropout draws, no host
  // value read per step): --cuda-graph on may then capture them once and
  // replay them. A model with an added type without it refuses --cuda-graph on.
  bool cuda_graph = false;
  std::string origin;  // filled in by the registry: "built-in", "program" or the plugin's file

  // Optional; the built-in types use them.
  std::vector<std::string> aliases{};          // other spellings a spec may use (conv, fc, bn)
  std::size_t min_inputs = 1, max_inputs = 1;  // how many nodes a node of this type reads
  // Checks the arguments when the spec is parsed and keeps them typed in `spec`
  // (arguments bound in arg_names order; Error naming the layer and the
  // argument's line:column). Without it the values stay text in spec.args and
  // the factory checks them (LayerArgs).
  std::function<void(const std::vector<SpecArg>& args, const std::string& at, LayerSpec& spec)>
      parse{};
  // The canonical arguments, "out=3"; without it spec.args as key=value.
  std::function<std::vector<std::string>(const LayerSpec&)> canonical{};
  LayerKind kind = LayerKind::custom;  // a built-in type's kind
};

class LayerRegistry {
 public:
  // The process-wide registry that model specs consult.
  static LayerRegistry& global();

  // Error when the name is malformed, a built-in one, or already registered.
  void add(LayerType type);
  // By name or alias; null when none. The pointer stays valid.
  const LayerType* find(std::string_view name) const;
  const LayerType* find(LayerKind kind) const;  // a built-in kind's type
  std::vector<std::string> names() const;       // in registration order, built-ins first
  // FNV-1a over every added (not built-in) type's name and origin, in
  // registration order: ranks compare it at start-up (every rank must load the
  // same plugins).
  std::uint64_t signature() const;

  // Registrations made while this is set are marked with `origin` (the plugin
  // loader sets a plugin's file name); "program" otherwise.
  void set_origin(std::string origin) { origin_ = std::move(origin); }

 private:
  std::deque<LayerType> types_;  // a deque: find()'s pointers outlive later additions
  std::string origin_ = "program";
};

}  // namespace ringtrain
