// The rule of tests/support/gpu_test.h: skip only where there is no CUDA build
// or no GPU; a driver problem on a machine with GPUs fails the test.
#include <catch2/catch.hpp>

#include "tests/support/gpu_test.h"

using namespace ringtrain;
using test::gpu_test_gate;
using test::GpuGate;

TEST_CASE("gpu tests: run, skip or fail") {
  const CudaProbe two{2, ""}, none{0, ""}, broken{0, "cudaErrorInsufficientDriver: driver too old"};
  // A CPU-only build skips whatever the machine has.
  CHECK(gpu_test_gate(false, assess_cuda_probe(two, true)).gate == GpuGate::skip);
  CHECK(gpu_test_gate(false, assess_cuda_probe(broken, true)).gate == GpuGate::skip);
  // A CUDA build runs on GPUs and skips where there are none.
  CHECK(gpu_test_gate(true, assess_cuda_probe(two, true)).gate == GpuGate::run);
  CHECK(gpu_test_gate(true, assess_cuda_probe(none, true)).gate == GpuGate::skip);
  CHECK(gpu_test_gate(true, assess_cuda_probe(none, false)).gate == GpuGate::skip);
  // A CUDA error: no GPU where there are no device nodes, a failure where there are.
  CHECK(gpu_test_gate(true, assess_cuda_probe(broken, false)).gate == GpuGate::skip);
  auto v = gpu_test_gate(true, assess_cuda_probe(broken, true));
  CHECK(v.gate == GpuGate::fail);
  CHECK_THAT(v.reason, Catch::Contains("cudaErrorInsufficientDriver"));
}
