// Defect guard: a polled "not ready" must not poison the next kernel launch.
// cudaEventQuery answers cudaErrorNotReady while work is queued, and the
// runtime also records that as the thread's last error, which the launch
// check (cudaGetLastError) would then report as the launch's failure. The
// sequence: queue enough work to keep the GPU busy, poll an ordering point
// until it is seen not ready, then launch a kernel, check its launch and its
// result. Exits 77 (skipped) without CUDA or a device.
#include <cstdio>
#include <vector>

#include "kernels/axpy.cuh"
#include "kernels/axpy.h"
#include "ringtrain/core/buffer_copy.h"
#include "ringtrain/core/ordering_point.h"
#include "ringtrain/launch/gpu_runtime.h"
#include "ringtrain/tensor/device_memory.h"
#include "tests/support/gpu_test.h"

int main() {
  using namespace ringtrain;
  if (!test::cuda_device_available()) return test::kSkippedExitCode;
  cuda_set_device(0);
  const Device gpu = Device::cuda(0);
  const std::size_t big = std::size_t{1} << 26, n = 4099;
  auto* bx = static_cast<float*>(device_allocate(big * sizeof(float), gpu));
  auto* by = static_cast<float*>(device_allocate(big * sizeof(float), gpu));
  device_zero(bx, big * sizeof(float), gpu);
  device_zero(by, big * sizeof(float), gpu);
  int not_ready_seen = 0;
  for (int attempt = 0; attempt < 20 && not_ready_seen == 0; ++attempt) {
    for (int i = 0; i < 50; ++i)
      kernels::axpy_f32_cuda(1.0f, bx, by, big, nullptr);  // ~10 ms of work
    const OrderingPoint busy = OrderingPoint::record(gpu, nullptr);
    while (!busy.reached()) ++not_ready_seen;
  }
  std::printf("polled 'not ready' %d time(s)\n", not_ready_seen);
  if (not_ready_seen == 0) {
    std::puts("FAIL: the GPU never looked busy: the sequence was not exercised");
    return 1;
  }
  // The launch right after the polls: its check must not report them.
  std::vector<float> x(n), y(n), expect(n);
  for (std::size_t i = 0; i < n; ++i) {
    x[i] = static_cast<float>(i % 17) - 8.0f;
    y[i] = static_cast<float>(i % 5);
    expect[i] = kernels::axpy_element(2.0f, x[i], y[i]);
  }
  copy_view(view_of(bx, n, gpu), view_of(x.data(), n));
  copy_view(view_of(by, n, gpu), view_of(y.data(), n));
  const OrderingPoint copied = OrderingPoint::record(gpu, nullptr);
  while (!copied.reached()) {
  }
  try {
    kernels::axpy_f32_cuda(2.0f, bx, by, n, nullptr);
  } catch (const std::exception& e) {
    std::printf("FAIL: the launch after a poll reported: %s\n", e.what());
    return 1;
  }
  copy_view(view_of(y.data(), n), view_of(by, n, gpu));
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < n; ++i) wrong += y[i] != expect[i];
  std::printf("axpy after polling: %zu wrong of %zu\n", wrong, n);
  device_free(bx, gpu);
  device_free(by, gpu);
  return wrong == 0 ? 0 : 1;
}
