// Where memory lives and where work runs.
#pragma once

#include <string>

namespace ringtrain {

enum class DeviceKind { cpu, cuda };

struct Device {
  DeviceKind kind = DeviceKind::cpu;
  int index = -1;  // CUDA ordinal among the visible devices; -1 on CPU

  static Device cpu() { return {}; }
  static Device cuda(int ordinal) { return {DeviceKind::cuda, ordinal}; }
  bool is_cpu() const { return kind == DeviceKind::cpu; }
  bool is_cuda() const { return kind == DeviceKind::cuda; }
  bool operator==(const Device&) const = default;
};

std::string device_name(const Device& d);  // "cpu", "cuda:1"

}  // namespace ringtrain
