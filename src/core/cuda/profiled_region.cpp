#include "core/profiled_region.h"

#include <cuda_profiler_api.h>
#include <cuda_runtime.h>

namespace ringtrain {

// A profiler that is not attached makes these no-ops; their errors (none
// expected) are cleared so that a later launch check does not report them.
ProfiledRegion::ProfiledRegion(bool on_gpu) : on_gpu_(on_gpu) {
  if (!on_gpu_) return;
  (void)cudaProfilerStart();
  (void)cudaGetLastError();
}

ProfiledRegion::~ProfiledRegion() {
  if (!on_gpu_) return;
  (void)cudaProfilerStop();
  (void)cudaGetLastError();
}

}  // namespace ringtrain
