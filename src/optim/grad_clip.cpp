#include "ringtrain/optim/grad_clip.h"

#include <cmath>

#include "kernels/grad_clip.cuh"
#include "kernels/grad_norm.cuh"
#include "kernels/scale.cuh"
#include "optim/cuda_backend.h"
#include "ringtrain/core/check.h"

namespace ringtrain {

namespace {

void check_f32(BufferView buf, const char* what) {
  RT_CHECK(buf.dtype == DType::f32, "{}: expected an f32 buffer, got {}", what,
           dtype_name(buf.dtype));
  RT_CHECK(buf.count == 0 || buf.ptr != nullptr, "{}: null buffer for {} elements", what,
           buf.count);
}

// Eight independent partial sums in a fixed order: the compiler may keep them in
// vector registers (strict FP forbids it to reorder one running sum), and the
// result depends only on the data, so identical gradients give identical norms.
double sum_squares_cpu(const float* __restrict x, std::size_t n) {
  constexpr std::size_t kLanes = 8;
  double lane[kLanes] = {};
  std::size_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (std::size_t l = 0; l < kLanes; ++l) lane[l] += kernels::squared_as_double(x[i + l]);
  for (std::size_t l = 0; i < n; ++i, ++l) lane[l] += kernels::squared_as_double(x[i]);
  return ((lane[0] + lane[1]) + (lane[2] + lane[3])) + ((lane[4] + lane[5]) + (lane[6] + lane[7]));
}

void scale_cpu(float* __restrict x, std::size_t n, float factor) {
  for (std::size_t i = 0; i < n; ++i) x[i] = kernels::scale_element(x[i], factor);
}

}  // namespace

double global_grad_norm(BufferView grads) {
  check_f32(grads, "gradient norm");
  const double sum = grads.device.is_cuda() ? optim_cuda::sum_squares(grads)
                                            : sum_squares_cpu(grads.as<float>(), grads.count);
  return std::sqrt(sum);
}

double clip_grad_norm(BufferView grads, double max_norm) {
  RT_CHECK(std::isfinite(max_norm) && max_norm > 0.0, "--clip-grad-norm must be > 0, got {}",
           max_norm);
  const double norm = global_grad_norm(grads);
  const float factor = kernels::clip_factor(norm, max_norm);
  if (factor != 1.f) scale_buffer(grads, factor);
  return norm;
}

void scale_buffer(BufferView buf, float factor, void* stream) {
  check_f32(buf, "buffer scaling");
  RT_CHECK(std::isfinite(factor), "buffer scaling: the factor must be finite, got {}", factor);
  if (buf.device.is_cuda())
    optim_cuda::scale(buf, factor, stream);
  else
    scale_cpu(buf.as<float>(), buf.count, factor);
}

struct GradClipper::DeviceMemory {
  optim_cuda::ClipMemory memory;
};

GradClipper::GradClipper(Device device) : device_(device) {
  if (device_.is_cuda()) device_memory_ = new DeviceMemory{optim_cuda::alloc_clip(device_.index)};
}

GradClipper::~GradClipper() {
  if (device_memory_ == nullptr) return;
  optim_cuda::free_clip(device_memory_->memory, device_.index);
  delete device_memory_;
}

void GradClipper::sum_squares(BufferView grads, void* stream) {
  check_f32(grads, "gradient norm");
  if (device_.is_cuda())
    optim_cuda::sum_squares_async(grads, device_memory_->memory.scratch, stream);
  else
    host_sum_ = sum_squares_cpu(grads.as<float>(), grads.count);
}

BufferView GradClipper::sum_view() const {
  void* p = device_.is_cuda() ? static_cast<void*>(device_memory_->memory.scratch)
                              : const_cast<double*>(&host_sum_);
  return {p, 1, DType::f64, device_};
}

void GradClipper::clip(BufferView grads, double max_norm, void* stream) {
  check_f32(grads, "gradient clipping");
  RT_CHECK(std::isfinite(max_norm) && max_norm > 0.0, "--clip-norm must be > 0, got {}", max_norm);
  if (device_.is_cuda()) {
    optim_cuda::clip_by_norm(grads, device_memory_->memory.scratch, max_norm, stream);
    return;
  }
  const float factor = kernels::clip_factor_of_sum(host_sum_, max_norm);
  if (factor != 1.f) scale_cpu(grads.as<float>(), grads.count, factor);
}

BufferView GradClipper::finite_probe(void* stream) {
  if (device_.is_cuda()) {
    optim_cuda::finite_probe(device_memory_->memory.scratch, device_memory_->memory.probe,
                             device_.index, stream);
    return {device_memory_->memory.probe, 1, DType::f32, device_};
  }
  host_probe_ = kernels::finite_probe(host_sum_);
  return {&host_probe_, 1, DType::f32, device_};
}

double GradClipper::norm() const {
  const double sum = device_.is_cuda()
                         ? optim_cuda::read_double(device_memory_->memory.scratch, device_.index)
                         : host_sum_;
  return std::sqrt(sum);
}

}  // namespace ringtrain
