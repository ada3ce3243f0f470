// Test values on a 16-bit grid (what a stored bf16/fp16 tensor holds), and
// their 16-bit words on a GPU and back. Shared by the stored-layer, tensor-core,
// cuDNN graph and cuBLASLt tests.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/precision.cuh"
#include "ringtrain/ops/compute_context.h"
#include "ringtrain/ops/precision.h"
#include "ringtrain/tensor/tensor.h"
#include "tests/model/test_data.h"

namespace ringtrain::test {

// v rounded to p's grid.
inline std::vector<float> on_grid(std::vector<float> v, DType p) {
  for (float& x : v) x = kernels::round_to_precision_grid(x, p);
  return v;
}
// hashed_vector(salt, n) on p's grid.
inline std::vector<float> on_grid(std::uint64_t salt, std::size_t n, DType p) {
  return on_grid(hashed_vector(salt, n), p);
}

// v's 16-bit words in dtype p, as a tensor on `device` (v on the grid: exact).
inline Tensor words_on(const std::vector<float>& v, DType p, Device device) {
  std::vector<std::uint16_t> w(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) w[i] = kernels::to_precision_bits(v[i], p);
  Tensor t = Tensor::empty({w.size()}, p, device);
  t.copy_from(Tensor::borrow(w.data(), {w.size()}, p, Device::cpu()));
  return t;
}

// v narrowed to p (rounded to nearest even; exact for values on p's grid),
// any of fp32, bf16 and fp16, as a tensor on `device`.
inline Tensor stored(const std::vector<float>& v, DType p, Device device,
                     const ComputeContext& cpu) {
  Tensor narrow = Tensor::empty({v.size()}, p, Device::cpu());
  convert_storage(cpu, narrow.buffer(), view_of(v.data(), v.size()));
  Tensor out = Tensor::empty({v.size()}, p, device);
  out.copy_from(narrow);
  return out;
}

// A 16-bit tensor's values widened (an fp32 one's as they are), after ctx's work.
inline std::vector<float> widened_values(const Tensor& t, const ComputeContext& ctx) {
  ctx.synchronize();
  std::vector<float> v(t.numel());
  if (t.dtype() == DType::f32) {
    Tensor::borrow(v.data(), {v.size()}, DType::f32, Device::cpu()).copy_from(t);
    return v;
  }
  std::vector<std::uint16_t> w(t.numel());
  Tensor::borrow(w.data(), {w.size()}, t.dtype(), Device::cpu()).copy_from(t);
  for (std::size_t i = 0; i < w.size(); ++i) v[i] = kernels::from_precision_bits(w[i], t.dtype());
  return v;
}

}  // namespace ringtrain::test
