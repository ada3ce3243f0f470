// Every call that blocks the host until a device has done its work goes through
// here, so that host synchronisation is visible and countable: the trainer
// writes the count per logged step (metrics.jsonl "host_syncs"), and a steady
// training step must ask for none. On the CPU the calls return at once, but they
// are counted all the same: the CPU and GPU steps run the same code path, so a
// CPU test of the count holds for the GPU step too.
#pragma once

#include <cstdint>
#include <string_view>

#include "ringtrain/core/device.h"
#include "ringtrain/core/ordering_point.h"

namespace ringtrain::host_sync {

// Host synchronisations requested by this process so far (all threads).
std::uint64_t count();

// Blocks until the device has passed `point`. `why` names the caller for
// error messages ("log: read the loss"). A CUDA error is thrown as an Error.
void wait(const OrderingPoint& point, std::string_view why);
// Blocks until everything queued on `stream` of `device` is done.
void wait_stream(Device device, void* stream, std::string_view why);
// Blocks until all work on the device is done (cudaDeviceSynchronize).
void wait_device(Device device, std::string_view why);

// For blocking library calls that synchronise by themselves (a cudaMemcpy to
// pageable host memory, say): counts one, waits for nothing.
void note(Device device, std::string_view why);

}  // namespace ringtrain::host_sync
