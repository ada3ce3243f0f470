// The one rule every `gpu` test follows. Without CUDA compiled in, or on a
// machine without a GPU, it prints why and exits 77, which ctest reports as
// skipped (SKIP_RETURN_CODE), never as passed. Where NVIDIA device nodes exist
// but CUDA reports an error (a driver problem), the test FAILS: a broken GPU
// must not read as "no GPU" (assess_cuda_probe in device_choice.h).
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>

#include "ringtrain/launch/device_choice.h"
#include "ringtrain/launch/gpu_runtime.h"

namespace ringtrain::test {

inline constexpr int kSkippedExitCode = 77;

enum class GpuGate { run, skip, fail };
struct GpuGateVerdict {
  GpuGate gate = GpuGate::skip;
  std::string reason;
};

// Pure, so that it is tested on CPU machines.
inline GpuGateVerdict gpu_test_gate(bool compiled, const CudaAssessment& cuda) {
  if (!compiled) return {GpuGate::skip, "ringtrain was built without CUDA"};
  if (cuda.fatal) return {GpuGate::fail, cuda.problem};
  if (cuda.count == 0)
    return {GpuGate::skip,
            cuda.problem.empty() ? std::string("no CUDA device visible") : cuda.problem};
  return {GpuGate::run, ""};
}

// True when a CUDA device can be used; false (after printing why) when the test
// should skip. A driver problem on a machine with GPUs ends the test with exit 1.
inline bool cuda_device_available() {
  const GpuGateVerdict v = gpu_test_gate(
      cuda_compiled(), assess_cuda_probe(cuda_probe(), nvidia_device_nodes_present()));
  if (v.gate == GpuGate::fail) {
    std::printf("FAILED: %s\n", v.reason.c_str());
    std::fflush(stdout);
    std::exit(1);
  }
  if (v.gate == GpuGate::skip) std::printf("SKIPPED: %s\n", v.reason.c_str());
  return v.gate == GpuGate::run;
}

}  // namespace ringtrain::test
