// make_layer: every layer, built-in or added, through its registered type's
// factory (model/builtin_layers.cpp for the built-ins).
#include <algorithm>

#include "model/layer.h"
#include "ringtrain/core/check.h"
#include "ringtrain/model/layer_registry.h"

namespace ringtrain {

std::unique_ptr<Layer> make_layer(const LayerSpec& spec, const std::vector<Shape>& inputs,
                                  const std::string& name, std::size_t index,
                                  const ComputeContext& ctx, std::size_t max_batch,
                                  const DropoutContext& dropout, Layout layout) {
  RT_CHECK(!inputs.empty(), "layer {} ({}) has no input", index, spec.to_string());
  const bool custom = spec.kind == LayerKind::custom;
  const LayerType* type =
      custom ? LayerRegistry::global().find(spec.type) : LayerRegistry::global().find(spec.kind);
  RT_CHECK(type != nullptr,
           "layer {} ({}): no layer type '{}' is registered (load its plugin with --plugin)", index,
           spec.to_string(), custom ? spec.type : std::string(layer_kind_name(spec.kind)));
  RT_CHECK(
      inputs.size() >= type->min_inputs && inputs.size() <= type->max_inputs,
      "layer {} ({}) takes {} input{}, got {}", index, spec.to_string(),
      type->max_inputs == 1 ? std::string("one") : fmt::format("at least {}", type->min_inputs),
      type->max_inputs == 1 ? "" : "s", inputs.size());
  RT_CHECK(type->gpu || !ctx.is_cuda(),
           "layer {} ({}): type '{}' from {} runs on the CPU only, and this model is on {}", index,
           spec.to_string(), type->name, type->origin, device_name(ctx.device()));
  const bool spatial =
      std::any_of(inputs.begin(), inputs.end(), [](const Shape& s) { return s.rank() == 3; });
  RT_CHECK(layout == Layout::nchw || !spatial || type->channels_last,
           "layer {} ({}): type '{}' from {} does not take channels-last [C, H, W] activations, "
           "and --layout nhwc asks for them: run with --layout nchw",
           index, spec.to_string(), type->name, type->origin);
  const LayerBuild build{name,      inputs[0], index,
                         max_batch, &ctx,      inputs,
                         &spec,     &dropout,  spatial ? layout : Layout::nchw};
  std::unique_ptr<Layer> layer = type->make(LayerArgs(name, spec.args), build);
  RT_CHECK(layer != nullptr, "layer {} ({}): the factory of '{}' from {} returned no layer", index,
           spec.to_string(), type->name, type->origin);
  RT_CHECK(type->max_inputs > 1 || layer->input_shape() == inputs[0],
           "layer {} ({}): type '{}' built a layer for input {} but gets {}", index,
           spec.to_string(), type->name, layer->input_shape().to_string(), inputs[0].to_string());
  return layer;
}

}  // namespace ringtrain
