// Raw memory on a device: allocation, copies between any two devices, zeroing.
// Backend-neutral: a CPU-only build answers CUDA requests with an Error.
#pragma once

#include <cstddef>

#include "ringtrain/core/device.h"

namespace ringtrain {

// 64-byte aligned on the CPU (whole cache lines, aligned AVX-512 loads); a
// cudaMalloc on a GPU. Zero bytes gives nullptr. Throws Error when out of memory.
void* device_allocate(std::size_t bytes, Device device);
void device_free(void* ptr, Device device) noexcept;
// Synchronous copy; either side may be the CPU or a GPU.
void device_copy(void* dst, Device dst_device, const void* src, Device src_device,
                 std::size_t bytes);
void device_zero(void* ptr, std::size_t bytes, Device device);
// Waits for all work queued on the device (a no-op on the CPU).
void device_synchronize(Device device);

}  // namespace ringtrain
