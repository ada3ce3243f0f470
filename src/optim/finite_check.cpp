#include "ringtrain/optim/finite_check.h"

#include <cmath>
#include <vector>

#include "optim/cuda_backend.h"
#include "ringtrain/core/check.h"

namespace ringtrain {

namespace {

void check_f32(BufferView buf) {
  RT_CHECK(buf.dtype == DType::f32, "finiteness check: expected an f32 buffer, got {}",
           dtype_name(buf.dtype));
}

// x * 0 is 0 for a finite x and NaN for NaN or Inf; eight independent lanes
// let the compiler vectorise the pass under strict floating point.
bool all_finite_cpu(const float* __restrict x, std::size_t n) {
  constexpr std::size_t kLanes = 8;
  float lane[kLanes] = {};
  std::size_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (std::size_t l = 0; l < kLanes; ++l) lane[l] += x[i + l] * 0.0f;
  for (std::size_t l = 0; i < n; ++i, ++l) lane[l] += x[i] * 0.0f;
  float total = 0;
  for (float v : lane) total += v;
  return total == 0.0f;
}

}  // namespace

bool all_finite(BufferView buf) {
  check_f32(buf);
  if (buf.count == 0) return true;
  if (buf.device.is_cuda()) return std::isfinite(optim_cuda::sum_squares(buf));
  return all_finite_cpu(buf.as<const float>(), buf.count);
}

std::optional<std::size_t> first_nonfinite(BufferView buf) {
  check_f32(buf);
  const float* x = buf.as<const float>();
  std::vector<float> host;
  if (buf.device.is_cuda()) {
    host.resize(buf.count);
    optim_cuda::copy_to_host(host.data(), buf);
    x = host.data();
  }
  for (std::size_t i = 0; i < buf.count; ++i)
    if (!std::isfinite(x[i])) return i;
  return std::nullopt;
}

}  // namespace ringtrain
