#include "ringtrain/launch/device_choice.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <system_error>

#include <fmt/ranges.h>

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
    case DeviceRequest::automatic:
      return "auto";
    case DeviceRequest::cpu:
      return "cpu";
    case DeviceRequest::cuda:
      return "cuda";
  }
  return "?";
}

namespace {
std::string trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return std::string(s);
}

std::size_t distinct_count(std::vector<std::string> ids) {
  std::sort(ids.begin(), ids.end());
  return static_cast<std::size_t>(std::unique(ids.begin(), ids.end()) - ids.begin());
}

bool valid_entry(const std::string& e) {
  if (e.empty()) return false;
  if (e.rfind("GPU-", 0) == 0 || e.rfind("MIG-", 0) == 0) return true;
  // An ordinal: digits only. A negative number ends the list.
  return std::all_of(e.begin(), e.end(),
                     [](char c) { return std::isdigit(static_cast<unsigned char>(c)); });
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

const std::vector<std::string>& nvidia_device_node_paths() {
  static const std::vector<std::string> paths = {"/dev/nvidiactl", "/dev/nvidia0"};
  return paths;
}

bool nvidia_device_nodes_present(const std::vector<std::string>& paths) {
  std::error_code ec;  // an unreadable path counts as absent; never throws
  return std::any_of(paths.begin(), paths.end(),
                     [&ec](const std::string& p) { return std::filesystem::exists(p, ec); });
}

CudaAssessment assess_cuda_probe(const CudaProbe& probe, bool device_nodes_present) {
  CudaAssessment a;
  if (probe.error.empty()) {
    a.count = std::max(0, probe.count);
    return a;
  }
  a.fatal = device_nodes_present;
  a.problem =
      device_nodes_present
          ? fmt::format(
                "CUDA cannot use this machine's NVIDIA GPUs ({}): {}; fix the driver or "
                "CUDA installation, or pass --device cpu",
                fmt::join(nvidia_device_node_paths(), ", "), probe.error)
          : fmt::format("CUDA reports {} and no NVIDIA device node exists ({}): no GPU here",
                        probe.error, fmt::join(nvidia_device_node_paths(), ", "));
  return a;
}

DeviceChoice choose_device(const DeviceChoiceInput& in) {
  const int local_size = static_cast<int>(in.visible.size());
  RT_CHECK(in.local_rank >= 0 && in.local_rank < local_size,
           "local rank {} out of range for local size {}", in.local_rank, local_size);
  DeviceChoice choice;
  if (in.request == DeviceRequest::cpu) return choice;

  // The physical GPU each local rank would take; "" where it sees none.
  std::vector<std::string> chosen(in.visible.size());
  int with_gpu = -1, without_gpu = -1;
  for (int r = 0; r < local_size; ++r) {
    const auto& seen = in.visible[static_cast<std::size_t>(r)];
    if (seen.empty()) {
      if (without_gpu < 0) without_gpu = r;
      continue;
    }
    if (with_gpu < 0) with_gpu = r;
    chosen[static_cast<std::size_t>(r)] = seen[static_cast<std::size_t>(r) % seen.size()];
  }
  if (with_gpu < 0) {
    RT_CHECK(in.request != DeviceRequest::cuda,
             "--device cuda: no CUDA device is visible on host {}{}", in.host,
             !in.no_gpu_reason.empty() ? fmt::format(" ({})", in.no_gpu_reason)
             : in.cuda_visible_devices
                 ? fmt::format(" (CUDA_VISIBLE_DEVICES='{}')", *in.cuda_visible_devices)
                 : std::string(" (no driver, no device, or CUDA not compiled in)"));
    return choice;  // auto on a node without GPUs: CPU
  }
  RT_CHECK(without_gpu < 0,
           "--device {}: local rank {} on host {} sees no GPU while local rank {} sees {}: give "
           "every rank "
           "of a node a GPU, or pass --device cpu",
           device_request_name(in.request), without_gpu, in.host, with_gpu,
           in.visible[static_cast<std::size_t>(with_gpu)].size());

  // Two ranks on one physical GPU: found by id, so it is caught whether the
  // ranks see all GPUs, one each, or overlapping CUDA_VISIBLE_DEVICES lists.
  for (int a = 0; a < local_size && !in.allow_gpu_sharing; ++a)
    for (int b = a + 1; b < local_size; ++b)
      RT_CHECK(chosen[static_cast<std::size_t>(a)] != chosen[static_cast<std::size_t>(b)],
               "local ranks {} and {} on host {} would both use GPU {} ({} ranks on {} distinct "
               "GPU(s); a "
               "rank takes local_rank % the GPUs it sees): give each rank its own GPU, or pass "
               "--allow-gpu-sharing to place several ranks on one GPU",
               a, b, in.host, chosen[static_cast<std::size_t>(a)], local_size,
               distinct_count(chosen));

  const auto& mine = in.visible[static_cast<std::size_t>(in.local_rank)];
  const int ordinal = in.local_rank % static_cast<int>(mine.size());
  choice.device = Device::cuda(ordinal);
  choice.uuid = chosen[static_cast<std::size_t>(in.local_rank)];
  choice.physical_label = std::to_string(ordinal);
  if (in.cuda_visible_devices) {
    auto entries = parse_cuda_visible_devices(*in.cuda_visible_devices);
    if (static_cast<std::size_t>(ordinal) < entries.size())
      choice.physical_label = entries[ordinal];
  }
  for (int r = 0; r < local_size; ++r)
    if (chosen[static_cast<std::size_t>(r)] == choice.uuid) choice.gpu_local_ranks.push_back(r);
  choice.shared = choice.gpu_local_ranks.size() > 1;
  return choice;
}

}  // namespace ringtrain
