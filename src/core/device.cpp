#include "ringtrain/core/device.h"

#include <fmt/format.h>

namespace ringtrain {

std::string device_name(const Device& d) {
  return d.is_cpu() ? std::string("cpu") : fmt::format("cuda:{}", d.index);
}

}  // namespace ringtrain
