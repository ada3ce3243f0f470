// Runs a kernel on the first visible GPU and compares it with its CPU twin.
// Exits 77 (ctest: skipped) when CUDA is not compiled in or no device is visible.
#include <cstdio>
#include <vector>

#include "kernels/axpy.cuh"
#include "ringtrain/launch/gpu_runtime.h"
#include "tests/support/gpu_test.h"

int main() {
  using namespace ringtrain;
  if (!ringtrain::test::cuda_device_available()) return ringtrain::test::kSkippedExitCode;
  cuda_set_device(0);
  std::printf("device 0: %s\n", cuda_device_name(0).c_str());
  const std::size_t n = 1000003;
  std::vector<float> x(n), y(n), expect(n);
  for (std::size_t i = 0; i < n; ++i) {
    x[i] = static_cast<float>(i % 977) * 0.5f;
    y[i] = static_cast<float>(i % 131) - 3.0f;
    expect[i] = kernels::axpy_element(1.5f, x[i], y[i]);
  }
  cuda_smoke_axpy(1.5f, x.data(), y.data(), n);
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < n; ++i) wrong += y[i] != expect[i];
  std::printf("axpy on %zu elements: %zu wrong\n", n, wrong);
  return wrong == 0 ? 0 : 1;
}
