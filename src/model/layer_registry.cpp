// The registry of layer types beyond the built-ins (layer_registry.h).
#include "ringtrain/model/layer_registry.h"

#include <charconv>

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
  static LayerRegistry registry;
  return registry;
}

void LayerRegistry::add(LayerType type) {
  RT_CHECK(valid_name(type.name),
           "layer type '{}' (from {}): a name is lower-case letters, digits and '_', starting "
           "with a letter",
           type.name, origin_);
  RT_CHECK(!is_builtin_layer_name(type.name),
           "layer type '{}' (from {}) would hide the built-in layer of that name", type.name,
           origin_);
  for (const LayerType& t : types_)
    RT_CHECK(t.name != type.name, "layer type '{}' is registered twice: by {} and by {}", type.name,
             t.origin, origin_);
  RT_CHECK(static_cast<bool>(type.make), "layer type '{}' (from {}) has no factory", type.name,
           origin_);
  type.origin = origin_;
  types_.push_back(std::move(type));
}

const LayerType* LayerRegistry::find(std::string_view name) const {
  for (const LayerType& t : types_)
    if (t.name == name) return &t;
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
    mix(t.name);
    mix(t.origin);
  }
  return h;
}

}  // namespace ringtrain
