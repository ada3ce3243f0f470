// Loading layer plugins (plugin.h) with dlopen. Every check runs before the
// plugin's own code does, so a wrong file fails with its name and the reason.
#include <dlfcn.h>

#include <filesystem>

#include "ringtrain/core/check.h"
#include "ringtrain/model/plugin.h"

namespace ringtrain {

void load_layer_plugin(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  RT_CHECK(!fs::is_directory(path, ec),
           "plugin '{}' is a directory: give the shared library file in it (lib<name>.so)", path);
  RT_CHECK(fs::exists(path, ec), "plugin '{}': no such file", path);
  RT_CHECK(fs::is_regular_file(path, ec), "plugin '{}' is not a regular file", path);
  // RTLD_NOW: an unresolved symbol (a plugin built against another build of
  // ringtrain) fails here, not in the middle of training. The handle is never
  // closed: the registered factories live in the plugin.
  void* handle = dlopen(fs::absolute(path).c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* why = dlerror();
    RT_CHECK(false, "plugin '{}' cannot be loaded: {}", path, why ? why : "unknown reason");
  }
  using VersionFn = const char* (*)();
  using RegisterFn = void (*)(LayerRegistry&);
  auto version = reinterpret_cast<VersionFn>(dlsym(handle, RINGTRAIN_PLUGIN_VERSION_SYMBOL));
  auto register_layers =
      reinterpret_cast<RegisterFn>(dlsym(handle, RINGTRAIN_PLUGIN_REGISTER_SYMBOL));
  RT_CHECK(version != nullptr && register_layers != nullptr,
           "plugin '{}' is not a ringtrain plugin: it does not export '{}' (define it with "
           "RINGTRAIN_PLUGIN(...) from ringtrain/model/plugin.h)",
           path,
           version == nullptr ? RINGTRAIN_PLUGIN_VERSION_SYMBOL : RINGTRAIN_PLUGIN_REGISTER_SYMBOL);
  const std::string built_against = version() ? version() : "(none)";
  RT_CHECK(built_against == RINGTRAIN_VERSION,
           "plugin '{}' was built against ringtrain {}, but this is ringtrain {}: rebuild it "
           "against this version",
           path, built_against, RINGTRAIN_VERSION);
  LayerRegistry& registry = LayerRegistry::global();
  registry.set_origin(fs::path(path).filename().string());
  try {
    register_layers(registry);
  } catch (...) {
    registry.set_origin("program");
    throw;
  }
  registry.set_origin("program");
}

void load_layer_plugins(const std::vector<std::string>& paths) {
  for (const std::string& p : paths) load_layer_plugin(p);
}

}  // namespace ringtrain
