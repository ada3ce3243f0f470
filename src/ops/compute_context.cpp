#include "ringtrain/ops/compute_context.h"

#include <cblas.h>

#include <cstdlib>

#include "ops/gpu_ops.h"

namespace ringtrain {

std::unique_ptr<ComputeContext> ComputeContext::create(Device device) {
  std::unique_ptr<ComputeContext> ctx(new ComputeContext(device));
  if (device.is_cuda()) {
    const detail::GpuHandles h = detail::gpu_handles_create(device.index);
    ctx->stream_ = h.stream;
    ctx->blas_ = h.blas;
    ctx->dnn_ = h.dnn;
  } else if (std::getenv("OPENBLAS_NUM_THREADS") == nullptr) {
    // One BLAS thread per rank unless the user asked for more: ranks are the
    // parallelism, and a threaded BLAS under every rank oversubscribes cores.
    openblas_set_num_threads(1);
  }
  return ctx;
}

ComputeContext::~ComputeContext() {
  if (device_.is_cuda()) detail::gpu_handles_destroy({stream_, blas_, dnn_});
}

void ComputeContext::synchronize() const {
  if (device_.is_cuda()) detail::gpu_stream_synchronize(stream_);
}

}  // namespace ringtrain
