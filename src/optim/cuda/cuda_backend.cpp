// The optim layer's CUDA side (host code, compiled by the host compiler): device
// selection, state allocation and kernel launches. Work goes on the default
// stream; only sum_squares waits, because its caller needs the number.
#include <cstddef>
#include <mutex>
#include <vector>

#include "core/cuda/check_cuda.h"
#include "kernels/adamw.h"
#include "kernels/grad_clip.h"
#include "kernels/grad_norm.h"
#include "kernels/nonfinite_guard.h"
#include "kernels/scale.h"
#include "kernels/sgd.h"
#include "optim/cuda_backend.h"
#include "ringtrain/core/host_sync.h"
#include "tensor/cuda_memory.h"

namespace ringtrain::optim_cuda {

namespace {

// Makes `ordinal` current for the scope and restores the caller's device, so a
// view on another device than the current one is still handled correctly.
class DeviceScope {
 public:
  explicit DeviceScope(int ordinal) {
    RT_CUDA_CHECK(cudaGetDevice(&previous_));
    if (ordinal != previous_) RT_CUDA_CHECK(cudaSetDevice(ordinal));
    changed_ = ordinal != previous_;
  }
  ~DeviceScope() {
    if (changed_) (void)cudaSetDevice(previous_);
  }
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;

 private:
  int previous_ = 0;
  bool changed_ = false;
};

// Scratch for the norm, allocated once per device and kept for the process: the
// norm runs every step and must not allocate in the hot loop. Not freed at exit
// on purpose: the statically linked runtime may be torn down first.
double* norm_scratch(int ordinal) {
  static std::mutex mutex;
  static std::vector<double*> per_device;
  std::lock_guard<std::mutex> lock(mutex);
  const auto index = static_cast<std::size_t>(ordinal);
  if (per_device.size() <= index) per_device.resize(index + 1, nullptr);
  if (per_device[index] == nullptr) {
    void* p = nullptr;
    RT_CUDA_CHECK(cudaMalloc(&p, kernels::kSumSquaresScratchCount * sizeof(double)));
    per_device[index] = static_cast<double*>(p);
  }
  return per_device[index];
}

}  // namespace

float* alloc_zeroed_f32(std::size_t count, int ordinal) {
  if (count == 0) return nullptr;
  DeviceScope scope(ordinal);
  void* p = detail::cuda_allocate_here(count * sizeof(float));  // counted: device_memory_use
  const cudaError_t e = cudaMemset(p, 0, count * sizeof(float));
  if (e != cudaSuccess) {
    detail::cuda_free(p, ordinal);
    RT_CUDA_CHECK(e);
  }
  return static_cast<float*>(p);
}

void free_f32(float* ptr, int ordinal) noexcept {
  if (ptr == nullptr) return;
  int previous = 0;
  if (cudaGetDevice(&previous) != cudaSuccess) return;
  if (previous != ordinal) (void)cudaSetDevice(ordinal);
  detail::cuda_free(ptr, ordinal);
  if (previous != ordinal) (void)cudaSetDevice(previous);
}

void copy_to_device(BufferView dst, const float* src) {
  if (dst.count == 0) return;
  DeviceScope scope(dst.device.index);
  RT_CUDA_CHECK(cudaMemcpy(dst.ptr, src, dst.bytes(), cudaMemcpyHostToDevice));
}

void copy_to_host(float* dst, BufferView src) {
  if (src.count == 0) return;
  DeviceScope scope(src.device.index);
  RT_CUDA_CHECK(cudaMemcpy(dst, src.ptr, src.bytes(), cudaMemcpyDeviceToHost));
}

void sgd_step(BufferView params, BufferView grads, float* momentum_buf, float lr, float momentum,
              float weight_decay, bool nesterov, const float* decay_mask,
              const kernels::NonfiniteGuardState* gate, void* stream) {
  DeviceScope scope(params.device.index);
  if (momentum_buf == nullptr)
    kernels::sgd_plain_f32_cuda(params.as<float>(), grads.as<float>(), params.count, lr,
                                weight_decay, decay_mask, gate, stream);
  else
    kernels::sgd_momentum_f32_cuda(params.as<float>(), grads.as<float>(), momentum_buf,
                                   params.count, lr, momentum, weight_decay, nesterov, decay_mask,
                                   gate, stream);
}

void adamw_step(BufferView params, BufferView grads, float* exp_avg, float* exp_avg_sq,
                const kernels::AdamWCoefficients& coefficients, const float* decay_mask,
                const kernels::NonfiniteGuardState* gate, void* stream) {
  DeviceScope scope(params.device.index);
  kernels::adamw_f32_cuda(params.as<float>(), grads.as<float>(), exp_avg, exp_avg_sq, params.count,
                          coefficients, decay_mask, gate, stream);
}

double sum_squares(BufferView x) {
  if (x.count == 0) return 0.0;
  DeviceScope scope(x.device.index);
  double* scratch = norm_scratch(x.device.index);
  kernels::sum_squares_f32_cuda(x.as<float>(), x.count, scratch, nullptr);
  double result = 0.0;
  // The caller needs the number: a host sync (counted), once per clipped step.
  host_sync::note(x.device, "clip: read the gradient norm");
  RT_CUDA_CHECK(cudaMemcpy(&result, scratch, sizeof(double), cudaMemcpyDeviceToHost));
  return result;
}

ClipMemory alloc_clip(int ordinal) {
  DeviceScope scope(ordinal);
  ClipMemory m;
  void* scratch = nullptr;
  RT_CUDA_CHECK(cudaMalloc(&scratch, kernels::kSumSquaresScratchCount * sizeof(double)));
  m.scratch = static_cast<double*>(scratch);
  void* probe = nullptr;
  const cudaError_t e = cudaMalloc(&probe, sizeof(float));
  if (e != cudaSuccess) {
    free_clip(m, ordinal);
    RT_CUDA_CHECK(e);
  }
  m.probe = static_cast<float*>(probe);
  // A sum of 0 until the first step writes one.
  RT_CUDA_CHECK(cudaMemset(m.scratch, 0, sizeof(double)));
  return m;
}

void free_clip(const ClipMemory& memory, int ordinal) noexcept {
  int previous = 0;
  if (cudaGetDevice(&previous) != cudaSuccess) return;
  if (previous != ordinal) (void)cudaSetDevice(ordinal);
  if (memory.scratch != nullptr) (void)cudaFree(memory.scratch);
  if (memory.probe != nullptr) (void)cudaFree(memory.probe);
  if (previous != ordinal) (void)cudaSetDevice(previous);
}

void sum_squares_async(BufferView x, double* scratch, void* stream) {
  DeviceScope scope(x.device.index);
  if (x.count == 0) {
    RT_CUDA_CHECK(cudaMemsetAsync(scratch, 0, sizeof(double), static_cast<cudaStream_t>(stream)));
    return;
  }
  kernels::sum_squares_f32_cuda(x.as<float>(), x.count, scratch, stream);
}

void clip_by_norm(BufferView x, const double* sum_squares, double max_norm, void* stream) {
  DeviceScope scope(x.device.index);
  kernels::clip_by_norm_f32_cuda(x.as<float>(), x.count, sum_squares, max_norm, stream);
}

void finite_probe(const double* sum_squares, float* probe, int ordinal, void* stream) {
  DeviceScope scope(ordinal);
  kernels::finite_probe_cuda(sum_squares, probe, stream);
}

double read_double(const double* value, int ordinal) {
  DeviceScope scope(ordinal);
  double result = 0.0;
  host_sync::note(Device::cuda(ordinal), "clip: read the gradient norm");
  RT_CUDA_CHECK(cudaMemcpy(&result, value, sizeof(double), cudaMemcpyDeviceToHost));
  return result;
}

void scale(BufferView x, float factor, void* stream) {
  DeviceScope scope(x.device.index);
  kernels::scale_f32_cuda(x.as<float>(), x.count, factor, stream);
}

GuardMemory alloc_guard(int ordinal) {
  DeviceScope scope(ordinal);
  const kernels::NonfiniteGuardState initial;
  GuardMemory m;
  void* state = nullptr;
  RT_CUDA_CHECK(cudaMalloc(&state, sizeof(initial)));
  m.state = static_cast<kernels::NonfiniteGuardState*>(state);
  void* mirror = nullptr;
  cudaError_t e = cudaHostAlloc(&mirror, sizeof(initial), cudaHostAllocMapped);
  if (e == cudaSuccess) {
    m.mirror_host = static_cast<kernels::NonfiniteGuardState*>(mirror);
    *m.mirror_host = initial;
    void* device_view = nullptr;
    e = cudaHostGetDevicePointer(&device_view, mirror, 0);
    m.mirror_device = static_cast<kernels::NonfiniteGuardState*>(device_view);
  }
  if (e == cudaSuccess) e = cudaMemcpy(state, &initial, sizeof(initial), cudaMemcpyHostToDevice);
  if (e != cudaSuccess) {
    free_guard(m, ordinal);
    RT_CUDA_CHECK(e);
  }
  return m;
}

void free_guard(const GuardMemory& memory, int ordinal) noexcept {
  int previous = 0;
  if (cudaGetDevice(&previous) != cudaSuccess) return;
  if (previous != ordinal) (void)cudaSetDevice(ordinal);
  if (memory.state != nullptr) (void)cudaFree(memory.state);
  if (memory.mirror_host != nullptr) (void)cudaFreeHost(memory.mirror_host);
  if (previous != ordinal) (void)cudaSetDevice(previous);
}

void guard_first_nonfinite(BufferView x, unsigned long long offset, unsigned long long* first_bad,
                           void* stream) {
  DeviceScope scope(x.device.index);
  kernels::first_nonfinite_index_f32_cuda(x.as<const float>(), x.count, offset, first_bad, stream);
}

void guard_save_loss(const GuardMemory& memory, BufferView loss_totals, void* stream) {
  DeviceScope scope(loss_totals.device.index);
  kernels::nonfinite_save_loss_cuda(memory.state, loss_totals.as<const double>(), stream);
}

void guard_check_loss(const GuardMemory& memory, BufferView loss_totals, float* poison,
                      void* stream) {
  DeviceScope scope(loss_totals.device.index);
  kernels::nonfinite_loss_check_cuda(memory.state, loss_totals.as<const double>(), poison, stream);
}

void guard_decide(const GuardMemory& memory, unsigned long long step, unsigned long long max_skips,
                  unsigned long long samples, BufferView loss_totals, void* stream) {
  DeviceScope scope(loss_totals.device.index);
  kernels::nonfinite_guard_decide_cuda(memory.state, memory.mirror_device, step, max_skips, samples,
                                       loss_totals.as<double>(), stream);
}

void guard_set_scaler(const GuardMemory& memory, const kernels::LossScalerState& scaler,
                      int ordinal) {
  DeviceScope scope(ordinal);
  RT_CUDA_CHECK(cudaDeviceSynchronize());
  RT_CUDA_CHECK(cudaMemcpy(&memory.state->scaler, &scaler, sizeof(scaler), cudaMemcpyHostToDevice));
  memory.mirror_host->scaler = scaler;
}

}  // namespace ringtrain::optim_cuda
