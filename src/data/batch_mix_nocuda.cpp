// CPU-only build: a batch on a GPU cannot be mixed (nor be there at all).
#include "data/batch_mix_gpu.h"
#include "ringtrain/core/check.h"

namespace ringtrain::detail {

void gpu_batch_mix(const float*, const std::int32_t*, float*, std::int32_t*,
                   const kernels::BatchMix&, void*) {
  RT_CHECK(false, "mixup and cutmix on a GPU need a CUDA build (this ringtrain is CPU-only)");
}

}  // namespace ringtrain::detail
