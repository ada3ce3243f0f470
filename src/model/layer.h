// make_layer: a model spec's layer, built-in or registered, as a Layer.
// Internal to the model layer (the trainer sees only Model); tests build
// layers directly for their gradient checks.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "ringtrain/model/layer.h"
#include "ringtrain/model/model_spec.h"
#include "ringtrain/ops/compute_context.h"
#include "ringtrain/tensor/shape.h"

namespace ringtrain {

// Builds the layer `spec` for per-sample input `input`; the Error names the
// layer and the shape when they do not fit. `index` is the layer's position
// (dropout mixes it into its mask key); `dropout` must outlive the layer.
std::unique_ptr<Layer> make_layer(const LayerSpec& spec, const Shape& input,
                                  const std::string& name, std::size_t index,
                                  const ComputeContext& ctx, std::size_t max_batch,
                                  const DropoutContext& dropout);

}  // namespace ringtrain
