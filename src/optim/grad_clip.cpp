#include "ringtrain/optim/grad_clip.h"

#include <cmath>

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
  if (std::isfinite(norm) && norm > max_norm)
    scale_buffer(grads, static_cast<float>(max_norm / (norm + 1e-6)));
  return norm;
}

void scale_buffer(BufferView buf, float factor) {
  check_f32(buf, "buffer scaling");
  RT_CHECK(std::isfinite(factor), "buffer scaling: the factor must be finite, got {}", factor);
  if (buf.device.is_cuda())
    optim_cuda::scale(buf, factor);
  else
    scale_cpu(buf.as<float>(), buf.count, factor);
}

}  // namespace ringtrain
