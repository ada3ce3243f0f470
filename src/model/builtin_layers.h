// The built-in layer types, registered in the one registry that plugins use
// too (ringtrain/model/layer_registry.h).
#pragma once

#include "ringtrain/model/layer_registry.h"

namespace ringtrain {

// Adds every built-in type to `registry` (LayerRegistry::global() calls it once).
void register_builtin_layers(LayerRegistry& registry);

}  // namespace ringtrain
