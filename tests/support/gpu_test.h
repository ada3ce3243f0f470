// The one rule every `gpu` test follows: without CUDA compiled in, or without a
// visible device, it prints why and exits 77, which ctest reports as skipped
// (SKIP_RETURN_CODE), never as passed.
#pragma once

#include <cstdio>

#include "ringtrain/launch/gpu_runtime.h"

namespace ringtrain::test {

inline constexpr int kSkippedExitCode = 77;

// True when a CUDA device can be used; otherwise prints the reason.
inline bool cuda_device_available() {
  if (!cuda_compiled()) {
    std::puts("SKIPPED: ringtrain was built without CUDA");
    return false;
  }
  if (cuda_runtime_device_count() == 0) {
    std::puts("SKIPPED: no CUDA device visible");
    return false;
  }
  return true;
}

}  // namespace ringtrain::test
