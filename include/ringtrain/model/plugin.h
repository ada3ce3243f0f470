// Layer plugins: a shared library that registers layer types when
// `ringtrain train --plugin lib.so` (or load_layer_plugin) loads it.
//
//   #include "ringtrain/model/plugin.h"
//   static void register_layers(ringtrain::LayerRegistry& registry) {
//     registry.add({"layernorm", {"eps"}, make_layernorm});
//   }
//   RINGTRAIN_PLUGIN(register_layers)
//
// Build it with ringtrain_add_plugin(NAME sources...) from the CMake package.
// The plugin is compiled against ringtrain's headers and resolves ringtrain's
// symbols against the program that loads it, so it must be built against the
// same ringtrain version: the loader refuses any other.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ringtrain/config.h"
#include "ringtrain/model/layer_registry.h"

// The two symbols every plugin exports (RINGTRAIN_PLUGIN defines them).
#define RINGTRAIN_PLUGIN_VERSION_SYMBOL "ringtrain_plugin_version"
#define RINGTRAIN_PLUGIN_REGISTER_SYMBOL "ringtrain_plugin_register"

#define RINGTRAIN_PLUGIN(register_function)                                                  \
  extern "C" __attribute__((visibility("default"))) const char* ringtrain_plugin_version() { \
    return RINGTRAIN_VERSION;                                                                \
  }                                                                                          \
  extern "C" __attribute__((visibility("default"))) void ringtrain_plugin_register(          \
      ::ringtrain::LayerRegistry& registry) {                                                \
    register_function(registry);                                                             \
  }

namespace ringtrain {

// Loads the plugin at `path` and registers its layer types in
// LayerRegistry::global(). Error, naming the file, when it does not exist,
// cannot be loaded, lacks either symbol, was built against another ringtrain
// version, or registers a name that is taken.
void load_layer_plugin(const std::string& path);

// Loads each plugin in order (load_layer_plugin).
void load_layer_plugins(const std::vector<std::string>& paths);

}  // namespace ringtrain
