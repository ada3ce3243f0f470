// Layer types beyond the built-in ones. A type registered here is named in a
// model spec like a built-in layer (`layernorm`, `layernorm(eps=1e-5)`), and
// Model::build makes it through its factory. Register from your own program
// before parsing the spec, or from a plugin (ringtrain/model/plugin.h) that
// `ringtrain train --plugin lib.so` loads.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ringtrain/model/layer.h"
#include "ringtrain/ops/compute_context.h"
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
  Shape input;                // per-sample input shape
  std::size_t index = 0;      // position in the spec
  std::size_t max_batch = 0;  // the largest batch forward will see
  const ComputeContext* ctx = nullptr;
};

struct LayerType {
  std::string name;                    // lower case: [a-z][a-z0-9_]*
  std::vector<std::string> arg_names;  // positional order; all optional to the parser
  std::function<std::unique_ptr<Layer>(const LayerArgs&, const LayerBuild&)> make;
  // True when forward/backward accept device pointers on a GPU context;
  // a CPU-only type used on a GPU is an Error when the model is built.
  bool gpu = false;
  std::string origin;  // filled in by the registry: "program" or the plugin's file name
};

class LayerRegistry {
 public:
  // The process-wide registry that model specs consult.
  static LayerRegistry& global();

  // Error when the name is malformed, a built-in one, or already registered.
  void add(LayerType type);
  const LayerType* find(std::string_view name) const;
  std::vector<std::string> names() const;  // in registration order
  // FNV-1a over every type's name and origin, in registration order: ranks
  // compare it at start-up (every rank must load the same plugins).
  std::uint64_t signature() const;

  // Registrations made while this is set are marked with `origin` (the plugin
  // loader sets a plugin's file name); "program" otherwise.
  void set_origin(std::string origin) { origin_ = std::move(origin); }

 private:
  std::vector<LayerType> types_;
  std::string origin_ = "program";
};

}  // namespace ringtrain
