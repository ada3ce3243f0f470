// A plugin that claims to be built against another ringtrain version: the
// loader must refuse it before calling its registration.
#include "ringtrain/model/layer_registry.h"

extern "C" __attribute__((visibility("default"))) const char* ringtrain_plugin_version() {
  return "0.0.0-other";
}
extern "C" __attribute__((visibility("default"))) void ringtrain_plugin_register(
    ringtrain::LayerRegistry&) {}
