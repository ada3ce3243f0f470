// What the GPU op tests share: moving vectors to and from the first GPU, the
// elementwise comparison with the CPU result (relative tolerance, counting the
// elements that differ), and a CPU and a GPU context with --tf32 off so the
// tolerances stay tight. Catch2 tests only.
#pragma once

#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <memory>
#include <vector>

#include "ringtrain/launch/gpu_runtime.h"
#include "ringtrain/tensor/tensor.h"

namespace ringtrain::test {

inline const Device kGpu = Device::cuda(0);

inline Tensor to_gpu(const std::vector<float>& v) {
  Tensor t = Tensor::empty({v.size()}, DType::f32, kGpu);
  t.copy_from(Tensor::borrow(const_cast<float*>(v.data()), {v.size()}, DType::f32, Device::cpu()));
  return t;
}
inline Tensor to_gpu(const std::vector<std::int32_t>& v) {
  Tensor t = Tensor::empty({v.size()}, DType::i32, kGpu);
  t.copy_from(
      Tensor::borrow(const_cast<std::int32_t*>(v.data()), {v.size()}, DType::i32, Device::cpu()));
  return t;
}
inline std::vector<float> to_host(const Tensor& t, const ComputeContext& ctx) {
  ctx.synchronize();
  std::vector<float> v(t.numel());
  Tensor::borrow(v.data(), {v.size()}, DType::f32, Device::cpu()).copy_from(t);
  return v;
}
inline std::vector<float> to_host(const float* p, std::size_t n, const ComputeContext& ctx) {
  return to_host(Tensor::borrow(const_cast<float*>(p), {n}, DType::f32, kGpu), ctx);
}

inline void require_close(const std::vector<float>& gpu, const std::vector<float>& cpu, double tol,
                          const char* what) {
  REQUIRE(gpu.size() == cpu.size());
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < gpu.size(); ++i)
    if (!(std::abs(gpu[i] - cpu[i]) <= tol * (1.0 + std::abs(cpu[i])))) ++wrong;
  INFO(what << ": " << wrong << " of " << gpu.size() << " elements differ by more than " << tol);
  CHECK(wrong == 0);
}

struct Contexts {
  std::unique_ptr<ComputeContext> cpu = ComputeContext::create(Device::cpu());
  std::unique_ptr<ComputeContext> gpu = ComputeContext::create(kGpu, Tf32Mode::off);
};

}  // namespace ringtrain::test
