// The storage types of activations and their gradients, and the one way a
// kernel reads and writes them: load<T> widens a stored value to fp32, the
// kernel computes in fp32, store<T> narrows (round to nearest even, as the
// hardware converts; fp16 overflows to Inf at 65520). The CPU loops call the
// same functions, so a CPU run stores the bits a GPU run stores.
//
// bf16 and fp16 values travel as 16-bit words of their own types (not
// __nv_bfloat16 / __half), so these headers compile for the host without CUDA
// and a bf16 word cannot be passed where an fp16 one is meant.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/host_device.cuh"
#include "kernels/reduce.cuh"
#include "ringtrain/core/dtype.h"

namespace ringtrain::kernels {

struct bf16_word {
  std::uint16_t bits;
};
struct f16_word {
  std::uint16_t bits;
};
static_assert(sizeof(bf16_word) == 2 && sizeof(f16_word) == 2);

RT_HD float load(const float* p, std::size_t i) {
  return p[i];
}
RT_HD float load(const bf16_word* p, std::size_t i) {
  return bf16_to_float(p[i].bits);
}
RT_HD float load(const f16_word* p, std::size_t i) {
  return half_to_float(p[i].bits);
}
RT_HD void store(float* p, std::size_t i, float v) {
  p[i] = v;
}
RT_HD void store(bf16_word* p, std::size_t i, float v) {
  p[i].bits = float_to_bf16(v);
}
RT_HD void store(f16_word* p, std::size_t i, float v) {
  p[i].bits = float_to_half(v);
}

// The element type a DType is stored as (f32, bf16, f16).
template <DType D>
struct storage_of;
template <>
struct storage_of<DType::f32> {
  using type = float;
};
template <>
struct storage_of<DType::bf16> {
  using type = bf16_word;
};
template <>
struct storage_of<DType::f16> {
  using type = f16_word;
};
template <DType D>
using storage_t = typename storage_of<D>::type;

// Calls f(T{}) with T the storage type of `d` (f32, bf16 or f16): one
// dispatch per launch, not per element. Another dtype is a caller's error:
// it gets f32's.
template <typename F>
decltype(auto) with_storage(DType d, F&& f) {
  switch (d) {
    case DType::bf16:
      return f(bf16_word{});
    case DType::f16:
      return f(f16_word{});
    default:
      return f(float{});
  }
}

// Calls f(T{}, D{}) for the storage types of `t` and `d`: the dispatch of a
// launch that reads one storage type and writes another (a gradient into an
// fp32 sum, a conversion).
template <typename F>
decltype(auto) with_storage_pair(DType t, DType d, F&& f) {
  return with_storage(t, [&](auto a) { return with_storage(d, [&](auto b) { return f(a, b); }); });
}

// Calls f(float{}) for an fp32 buffer, else f(T{}): a gradient a fused node
// writes is of the storage type T, or fp32 where the model sums it. One
// instantiation fewer than with_storage_pair.
template <typename T, typename F>
void with_storage_or_f32(DType d, F&& f) {
  if (d == DType::f32)
    f(float{});
  else
    f(T{});
}

}  // namespace ringtrain::kernels
