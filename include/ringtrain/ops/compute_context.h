// Where ops run: the device, and on a GPU the stream and the cuBLAS / cuDNN
// handles bound to it. One per model (per rank), created once. Every op takes
// it and dispatches on its device, so model code never asks which backend it is.
#pragma once

#include <cstddef>
#include <memory>

#include "ringtrain/core/device.h"
#include "ringtrain/core/dtype.h"
#include "ringtrain/ops/math_mode.h"

namespace ringtrain {

namespace detail {
struct GpuHandles;
}

class ComputeContext {
 public:
  // On the CPU, also pins OpenBLAS to one thread unless OPENBLAS_NUM_THREADS
  // says otherwise (ranks are the parallelism). On a GPU, creates a stream
  // (blocking, so it orders with the legacy default stream) and the handles.
  // A CPU-only build answers a CUDA device with an Error. `tf32` sets the
  // cuBLAS math mode and the cuDNN convolution math type (math_mode.h); the
  // CPU ignores it. `precision` is the model's --precision: on a GPU with
  // bf16/fp16, the matrix products and convolutions whose inputs the model
  // stores on that grid run on 16-bit copies of them (tensor cores) with fp32
  // accumulation and output; the CPU computes in fp32 on the same values.
  static std::unique_ptr<ComputeContext> create(Device device,
                                                Tf32Mode tf32 = Tf32Mode::pytorch_default,
                                                DType precision = DType::f32);
  ~ComputeContext();
  ComputeContext(const ComputeContext&) = delete;
  ComputeContext& operator=(const ComputeContext&) = delete;

  Device device() const { return device_; }
  bool is_cuda() const { return device_.is_cuda(); }
  Tf32Mode tf32() const { return tf32_; }
  DType precision() const { return precision_; }
  // cudaStream_t, cublasHandle_t, cudnnHandle_t as void*; nullptr on the CPU.
  void* stream() const;
  void* blas_handle() const;
  void* dnn_handle() const;
  // Everything the GPU ops need (src/ops/gpu_ops.h); nullptr on the CPU.
  const detail::GpuHandles* gpu_handles() const { return gpu_.get(); }
  // Waits until all work queued on the stream is done (no-op on the CPU).
  void synchronize() const;

 private:
  ComputeContext(Device device, Tf32Mode tf32,
                 DType precision);  // in the .cpp, where GpuHandles is complete
  Device device_;
  Tf32Mode tf32_;
  DType precision_;
  std::unique_ptr<detail::GpuHandles> gpu_;
};

}  // namespace ringtrain
