// Raw memory on a device: allocation, zeroing. Copies go through copy_view
// (ringtrain/core/buffer_copy.h), which takes typed views.
// Backend-neutral: a CPU-only build answers CUDA requests with an Error.
#pragma once

#include <cstddef>
#include <vector>

#include "ringtrain/core/device.h"

namespace ringtrain {

// 64-byte aligned on the CPU (whole cache lines, aligned AVX-512 loads); a
// cudaMalloc on a GPU. Zero bytes gives nullptr. Throws Error when out of memory.
void* device_allocate(std::size_t bytes, Device device);
void device_free(void* ptr, Device device) noexcept;
void device_zero(void* ptr, std::size_t bytes, Device device);
// Waits for all work queued on the device (a no-op on the CPU).
void device_synchronize(Device device);

// ringtrain's own GPU memory, all devices of the process together: the bytes
// allocated now and the most at once since the process started (tensors,
// workspaces, scratch; the counterpart of PyTorch's memory_allocated and
// max_memory_allocated). What cuDNN, cuBLAS and NCCL allocate inside their
// own calls, and the CUDA context, are not in it. Zero in a CPU-only run.
struct DeviceMemoryUse {
  std::size_t in_use = 0, peak = 0;
  // The sizes of the largest allocations live when the peak was reached
  // (at most kPeakAllocationsKept, largest first): what the peak is made of
  // (the model's arena, a workspace, a widening buffer, the input batch).
  std::vector<std::size_t> largest_at_peak;
};
inline constexpr std::size_t kPeakAllocationsKept = 12;
DeviceMemoryUse device_memory_use();

}  // namespace ringtrain
