#include "ringtrain/launch/device_choice.h"

#include <algorithm>
#include <cctype>

#include "ringtrain/core/check.h"

namespace ringtrain {

DeviceRequest parse_device_request(std::string_view text) {
  if (text == "auto") return DeviceRequest::automatic;
  if (text == "cpu") return DeviceRequest::cpu;
  if (text == "cuda" || text == "gpu") return DeviceRequest::cuda;
  RT_CHECK(false, "--device: unknown value '{}' (expected auto, cpu or cuda)", text);
}

std::string_view device_request_name(DeviceRequest r) {
  switch (r) {
    case DeviceRequest::automatic: return "auto";
    case DeviceRequest::cpu: return "cpu";
    case DeviceRequest::cuda: return "cuda";
  }
  return "?";
}

namespace {
std::string trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return std::string(s);
}

bool valid_entry(const std::string& e) {
  if (e.empty()) return false;
  if (e.rfind("GPU-", 0) == 0 || e.rfind("MIG-", 0) == 0) return true;
  // An ordinal: digits only. A negative number ends the list.
  return std::all_of(e.begin(), e.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); });
}
}  // namespace

std::vector<std::string> parse_cuda_visible_devices(std::string_view value) {
  std::vector<std::string> entries;
  std::size_t start = 0;
  while (start <= value.size()) {
    std::size_t comma = value.find(',', start);
    if (comma == std::string_view::npos) comma = value.size();
    std::string entry = trim(value.substr(start, comma - start));
    if (!valid_entry(entry)) break;
    entries.push_back(entry);
    start = comma + 1;
  }
  return entries;
}

int visible_device_count(int runtime_device_count, const std::optional<std::string>& cuda_visible) {
  int count = std::max(0, runtime_device_count);
  if (cuda_visible) {
    count = std::min(count, static_cast<int>(parse_cuda_visible_devices(*cuda_visible).size()));
  }
  return count;
}

DeviceChoice choose_device(const DeviceChoiceInput& in) {
  RT_CHECK(in.local_rank >= 0 && in.local_rank < in.local_size,
           "local rank {} out of range for local size {}", in.local_rank, in.local_size);
  DeviceChoice choice;
  if (in.request == DeviceRequest::cpu) return choice;
  if (in.visible_devices <= 0) {
    RT_CHECK(in.request != DeviceRequest::cuda,
             "--device cuda: no CUDA device is visible on host {}{}", in.host,
             in.cuda_visible_devices
                 ? fmt::format(" (CUDA_VISIBLE_DEVICES='{}')", *in.cuda_visible_devices)
                 : std::string(" (no driver, no device, or CUDA not compiled in)"));
    return choice;  // auto on a machine without GPUs: CPU
  }
  if (in.local_size > in.visible_devices) {
    RT_CHECK(in.allow_gpu_sharing,
             "{} ranks on host {} but only {} visible GPU(s): launch at most {} ranks per node, "
             "or pass --allow-gpu-sharing to place several ranks on one GPU",
             in.local_size, in.host, in.visible_devices, in.visible_devices);
    choice.shared = true;
  }
  const int ordinal = in.local_rank % in.visible_devices;
  choice.device = Device::cuda(ordinal);
  choice.physical_label = std::to_string(ordinal);
  if (in.cuda_visible_devices) {
    auto entries = parse_cuda_visible_devices(*in.cuda_visible_devices);
    if (static_cast<std::size_t>(ordinal) < entries.size()) choice.physical_label = entries[ordinal];
  }
  return choice;
}

}  // namespace ringtrain
