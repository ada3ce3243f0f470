// The plugin: `ringtrain train --plugin liblayernorm_plugin.so --model '...; layernorm; ...'`.
#include "layernorm.h"
#include "ringtrain/model/plugin.h"

static void register_layers(ringtrain::LayerRegistry& registry) {
  registry.add(example::layernorm_type());
}

RINGTRAIN_PLUGIN(register_layers)
