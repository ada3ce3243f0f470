// Where ops run: the device, and on a GPU the stream and the cuBLAS / cuDNN
// handles bound to it. One per model (per rank), created once. Every op takes
// it and dispatches on its device, so model code never asks which backend it is.
#pragma once

#include <memory>

#include "ringtrain/core/device.h"

namespace ringtrain {

class ComputeContext {
 public:
  // On the CPU, also pins OpenBLAS to one thread unless OPENBLAS_NUM_THREADS
  // says otherwise (ranks are the parallelism). On a GPU, creates a stream
  // (blocking, so it orders with the legacy default stream) and the handles.
  // A CPU-only build answers a CUDA device with an Error.
  static std::unique_ptr<ComputeContext> create(Device device);
  ~ComputeContext();
  ComputeContext(const ComputeContext&) = delete;
  ComputeContext& operator=(const ComputeContext&) = delete;

  Device device() const { return device_; }
  bool is_cuda() const { return device_.is_cuda(); }
  // cudaStream_t, cublasHandle_t, cudnnHandle_t as void*; nullptr on the CPU.
  void* stream() const { return stream_; }
  void* blas_handle() const { return blas_; }
  void* dnn_handle() const { return dnn_; }
  // Waits until all work queued on the stream is done (no-op on the CPU).
  void synchronize() const;

 private:
  explicit ComputeContext(Device device) : device_(device) {}
  Device device_;
  void* stream_ = nullptr;
  void* blas_ = nullptr;
  void* dnn_ = nullptr;
};

}  // namespace ringtrain
