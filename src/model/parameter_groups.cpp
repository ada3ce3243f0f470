#include "ringtrain/model/parameter_groups.h"

#include "ringtrain/core/check.h"
#include "ringtrain/model/model.h"
#include "ringtrain/model/model_spec.h"

namespace ringtrain {

namespace {

bool contains(std::string_view text, std::string_view part) {
  return text.find(part) != std::string_view::npos;
}

// The tensor's own name: "weight" of "layer1.0.bn1.weight".
std::string_view leaf(std::string_view name) {
  const std::size_t dot = name.rfind('.');
  return dot == std::string_view::npos ? name : name.substr(dot + 1);
}

bool exempt(const Model& model, const ParamInfo& p, const NoDecay& g) {
  const std::vector<LayerSpec>& layers = model.spec().layers;
  const LayerSpec* layer = p.layer < layers.size() ? &layers[p.layer] : nullptr;
  const std::string type = layer == nullptr ? std::string()
                           : layer->kind == LayerKind::custom
                               ? layer->type
                               : std::string(layer_kind_name(layer->kind));
  const std::string node = model.layer_name(p.layer);
  if (g.bias && leaf(p.name) == "bias") return true;
  if (g.norm && (contains(type, "norm") || (layer == nullptr && contains(node, "norm"))))
    return true;
  if (g.embedding && (contains(type, "embed") || contains(p.name, "embed") || leaf(node) == "wte" ||
                      leaf(node) == "wpe" || contains(p.name, "wte.") || contains(p.name, "wpe.")))
    return true;
  return false;
}

}  // namespace

std::string NoDecay::to_string() const {
  std::string s;
  for (const auto& [on, name] :
       {std::pair{norm, "norm"}, {bias, "bias"}, {embedding, "embedding"}}) {
    if (!on) continue;
    if (!s.empty()) s.push_back(',');
    s.append(name);
  }
  return s;
}

NoDecay parse_no_decay(std::string_view text) {
  NoDecay g;
  if (text.empty() || text == "none") return g;
  std::size_t begin = 0;
  while (begin <= text.size()) {
    const std::size_t comma = std::min(text.find(',', begin), text.size());
    const std::string_view item = text.substr(begin, comma - begin);
    if (item == "norm")
      g.norm = true;
    else if (item == "bias")
      g.bias = true;
    else if (item == "embedding")
      g.embedding = true;
    else
      RT_CHECK(false,
               "--no-decay '{}': unknown parameter group '{}' (expected a comma list of "
               "norm, bias and embedding, or none)",
               text, item);
    begin = comma + 1;
  }
  return g;
}

std::vector<float> decay_mask(const Model& model, const NoDecay& groups) {
  std::vector<float> mask(model.param_count(), 1.f);
  for (const ParamInfo& p : model.param_info())
    if (exempt(model, p, groups))
      std::fill(mask.begin() + static_cast<std::ptrdiff_t>(p.offset),
                mask.begin() + static_cast<std::ptrdiff_t>(p.offset + p.count), 0.f);
  return mask;
}

std::vector<std::string> exempt_tensors(const Model& model, const NoDecay& groups) {
  std::vector<std::string> names;
  for (const ParamInfo& p : model.param_info())
    if (exempt(model, p, groups)) names.push_back(p.name);
  return names;
}

}  // namespace ringtrain
