// Timing a cuDNN engine on the GPU, for the convolutions' choice among their
// candidate engines (gpu_conv_plan.cpp; the record of choices is
// ops/conv_engine_record.h).
#pragma once

#include <functional>
#include <string>

namespace ringtrain::detail {

// The least time of `repeats` runs of `launch` on `stream`, in ms, after one
// untimed run (a first launch loads kernels). Blocks the host; never under a
// stream capture (stream_is_capturing).
float time_launches(void* stream, const std::function<void()>& launch, int repeats = 3);

bool stream_is_capturing(void* stream);

// "<GPU name> sm<major><minor> x<SMs>|cuDNN <version>": what a remembered
// choice holds for.
std::string engine_record_device();

}  // namespace ringtrain::detail
