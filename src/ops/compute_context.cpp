#include "ringtrain/ops/compute_context.h"

#include <cblas.h>

#include <cstdlib>

#include "ops/gpu_ops.h"

namespace ringtrain {

ComputeContext::ComputeContext(Device device, Tf32Mode tf32, DType precision)
    : device_(device), tf32_(tf32), precision_(precision) {}

std::unique_ptr<ComputeContext> ComputeContext::create(Device device, Tf32Mode tf32,
                                                       DType precision) {
  std::unique_ptr<ComputeContext> ctx(new ComputeContext(device, tf32, precision));
  if (device.is_cuda()) {
    ctx->gpu_ = std::make_unique<detail::GpuHandles>(
        detail::gpu_handles_create(device.index, tf32, precision));
  } else if (std::getenv("OPENBLAS_NUM_THREADS") == nullptr) {
    // One BLAS thread per rank unless the user asked for more: ranks are the
    // parallelism, and a threaded BLAS under every rank oversubscribes cores.
    openblas_set_num_threads(1);
  }
  return ctx;
}

ComputeContext::~ComputeContext() {
  if (gpu_) detail::gpu_handles_destroy(*gpu_);
}

void* ComputeContext::stream() const {
  return gpu_ ? gpu_->stream : nullptr;
}
void* ComputeContext::blas_handle() const {
  return gpu_ ? gpu_->blas : nullptr;
}
void* ComputeContext::dnn_handle() const {
  return gpu_ ? gpu_->dnn : nullptr;
}

void ComputeContext::synchronize() const {
  if (gpu_) detail::gpu_stream_synchronize(gpu_->stream);
}

}  // namespace ringtrain
