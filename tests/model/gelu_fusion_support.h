// What the CPU tests of the linear -> gelu_tanh fusions (forward: the GELU
// epilogue; backward: DGELU_BGRAD) share: gpt-nano's options with the fusion
// chosen, one step of a dtype's grid, and a tensor's values widened.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <vector>

#include "kernels/storage.cuh"
#include "ringtrain/model/model.h"
#include "ringtrain/tensor/tensor.h"

namespace ringtrain::test {

using LinearGelu = ModelOptions::LinearGelu;

inline constexpr std::size_t kContext = 128, kVocab = 64, kBatch = 2;

inline ModelOptions options(DType precision, bool fuse, LinearGelu linear_gelu,
                            std::size_t max_batch = kBatch) {
  ModelOptions o;
  o.device = Device::cpu();
  o.seed = 13;
  o.max_batch = max_batch;
  o.precision = precision;
  o.fuse = fuse;
  o.fuse_linear_gelu = linear_gelu;
  return o;
}

// One step of p's grid at |x| (the larger one at a power of two; the
// subnormal step below the normal range); fp32's where p is f32.
inline double grid_step(double x, DType p) {
  const int mantissa = p == DType::f16 ? 10 : p == DType::bf16 ? 7 : 23;
  const double floor = p == DType::f16 ? 0x1.0p-14 : 0x1.0p-126;
  return std::ldexp(1.0, std::ilogb(std::max(std::abs(x), floor)) - mantissa);
}

// The first n of a host tensor's values (all of them by default), widened.
inline std::vector<float> values(const Tensor& t, std::size_t n = 0) {
  std::vector<float> v(n == 0 ? t.numel() : n);
  kernels::with_storage(t.dtype(), [&](auto s) {
    using T = decltype(s);
    const T* p = static_cast<const T*>(t.data());
    for (std::size_t i = 0; i < v.size(); ++i) v[i] = kernels::load(p, i);
  });
  return v;
}

}  // namespace ringtrain::test
