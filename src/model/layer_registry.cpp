// The registry of layer types, built-in and added (layer_registry.h).
#include "ringtrain/model/layer_registry.h"

#include <charconv>

#include "model/builtin_layers.h"
#include "ringtrain/core/check.h"
#include "ringtrain/model/model_spec.h"

namespace ringtrain {

namespace {

const std::string* find_value(const std::vector<std::pair<std::string, std::string>>& values,
                              std::string_view key) {
  for (const auto& [k, v] : values)
    if (k == key) return &v;
  return nullptr;
}

constexpr std::string_view kBuiltIn = "built-in";

// The language's own words, which no type may take.
bool reserved(std::string_view name) {
  return name == "input" || name == "block" || name == "repeat";
}

bool valid_name(std::string_view name) {
  if (name.empty() || name.front() < 'a' || name.front() > 'z') return false;
  for (char c : name)
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_')) return false;
  return true;
}

}  // namespace

bool LayerArgs::has(std::string_view key) const {
  return find_value(values_, key) != nullptr;
}

double LayerArgs::number(std::string_view key, double fallback) const {
  const std::string* v = find_value(values_, key);
  if (v == nullptr) return fallback;
  double out = 0;
  const auto [end, ec] = std::from_chars(v->data(), v->data() + v->size(), out);
  RT_CHECK(ec == std::errc() && end == v->data() + v->size(),
           "layer {}: bad value '{}' for '{}': expected a number", layer_, *v, key);
  return out;
}

std::size_t LayerArgs::count(std::string_view key, std::size_t fallback) const {
  const std::string* v = find_value(values_, key);
  if (v == nullptr) return fallback;
  std::size_t out = 0;
  const auto [end, ec] = std::from_chars(v->data(), v->data() + v->size(), out);
  RT_CHECK(ec == std::errc() && end == v->data() + v->size(),
           "layer {}: bad value '{}' for '{}': expected a whole number", layer_, *v, key);
  return out;
}

LayerRegistry& LayerRegistry::global() {
  static LayerRegistry registry = [] {
    LayerRegistry r;
    r.set_origin(std::string(kBuiltIn));
    register_builtin_layers(r);
    r.set_origin("program");
    return r;
  }();
  return registry;
}

void LayerRegistry::add(LayerType type) {
  RT_CHECK(valid_name(type.name),
           "layer type '{}' (from {}): a name is lower-case letters, digits and '_', starting "
           "with a letter",
           type.name, origin_);
  std::vector<std::string> spellings = type.aliases;
  spellings.push_back(type.name);
  for (const std::string& name : spellings) {
    const LayerType* taken = find(name);
    RT_CHECK(!reserved(name) && (taken == nullptr || taken->origin != kBuiltIn),
             "layer type '{}' (from {}) would hide the built-in layer of that name", name, origin_);
    RT_CHECK(taken == nullptr, "layer type '{}' is registered twice: by {} and by {}", name,
             taken ? taken->origin : "", origin_);
  }
  RT_CHECK(static_cast<bool>(type.make), "layer type '{}' (from {}) has no factory", type.name,
           origin_);
  RT_CHECK(type.min_inputs >= 1 && type.min_inputs <= type.max_inputs,
           "layer type '{}' (from {}) reads {} to {} inputs: give at least one", type.name, origin_,
           type.min_inputs, type.max_inputs);
  type.origin = origin_;
  types_.push_back(std::move(type));
}

const LayerType* LayerRegistry::find(std::string_view name) const {
  for (const LayerType& t : types_) {
    if (t.name == name) return &t;
    for (const std::string& a : t.aliases)
      if (a == name) return &t;
  }
  return nullptr;
}

const LayerType* LayerRegistry::find(LayerKind kind) const {
  if (kind == LayerKind::custom) return nullptr;
  for (const LayerType& t : types_)
    if (t.kind == kind && t.origin == kBuiltIn) return &t;
  return nullptr;
}

std::vector<std::string> LayerRegistry::names() const {
  std::vector<std::string> out;
  for (const LayerType& t : types_) out.push_back(t.name);
  return out;
}

std::uint64_t LayerRegistry::signature() const {
  std::uint64_t h = 0xcbf29ce484222325ull;
  auto mix = [&h](std::string_view s) {
    for (const unsigned char c : s) {
      h ^= c;
      h *= 0x100000001b3ull;
    }
    h ^= 0xff;
    h *= 0x100000001b3ull;
  };
  for (const LayerType& t : types_) {
    if (t.origin == kBuiltIn) continue;  // the same in every build of this version
    mix(t.name);
    mix(t.origin);
  }
  return h;
}

}  // namespace ringtrain
