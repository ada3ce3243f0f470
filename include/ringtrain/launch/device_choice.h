// Which device a rank uses. A pure function of the request, the rank's place on
// its node and the devices it can see, so that it is tested without GPUs. It
// runs before any CUDA context or NCCL communicator exists.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ringtrain/core/device.h"

namespace ringtrain {

enum class DeviceRequest { automatic, cpu, cuda };

// "auto" | "cpu" | "cuda"; throws Error naming the flag and the value.
DeviceRequest parse_device_request(std::string_view text);
std::string_view device_request_name(DeviceRequest r);

// The entries of CUDA_VISIBLE_DEVICES, as the CUDA runtime reads them: a comma
// separated list that ends at the first invalid entry (e.g. "-1"). Entries may
// be ordinals, GPU-UUIDs or MIG ids. nullopt means the variable is unset.
std::vector<std::string> parse_cuda_visible_devices(std::string_view value);

// The number of devices a process can use: what the runtime reports, capped by
// CUDA_VISIBLE_DEVICES when it is set (the runtime already honours it; the cap
// keeps the pure function honest when fed a physical count).
int visible_device_count(int runtime_device_count, const std::optional<std::string>& cuda_visible);

struct DeviceChoiceInput {
  DeviceRequest request = DeviceRequest::automatic;
  int local_rank = 0;
  int local_size = 1;
  int visible_devices = 0;
  bool allow_gpu_sharing = false;
  std::optional<std::string> cuda_visible_devices;  // for the physical label
  std::string host;                                 // for error messages
};

struct DeviceChoice {
  Device device;
  // What the user knows the GPU as: the CUDA_VISIBLE_DEVICES entry for the
  // chosen ordinal, or the ordinal itself; "-" on CPU.
  std::string physical_label = "-";
  bool shared = false;  // more local ranks than GPUs, allowed by the user
};

// GPU: local_rank % visible_devices. More local ranks than GPUs is an Error
// unless allow_gpu_sharing. auto picks cpu where no GPU is visible; an explicit
// cuda request with none visible is an Error.
DeviceChoice choose_device(const DeviceChoiceInput& in);

}  // namespace ringtrain
