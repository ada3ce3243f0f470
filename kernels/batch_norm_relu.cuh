// Fused BatchNorm + ReLU and BatchNorm + add + ReLU, one element each: shared
// by kernels/batch_norm_relu.cu and the CPU loops in src/ops/batch_norm_relu.cpp.
//
// The fused form must give the unfused plan's bits (that plan stays the
// reference it is tested against). So every value the unfused plan stores
// (BatchNorm's y, the add's sum) is rounded to the storage type T in a
// register exactly where it was stored, by a store<T> and a load<T>; relu of
// a value on T's grid is on T's grid, so the output is stored once. Backward
// masks dy with the stored output (relu's mask: y > 0 exactly where its input
// was), which is exact, as relu's stored dx was.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "kernels/axpy.cuh"
#include "kernels/batch_norm.cuh"
#include "kernels/precision.cuh"
#include "kernels/storage.cuh"

namespace ringtrain::kernels {

// v where cond > 0, else +0: relu's select (relu_forward_element(v) is
// positive_part(v, v), relu_backward_element(y, dy) is positive_part(y, dy),
// bit for bit). On the host as a mask of v's bits, not a branch: the CPU's
// fused loops would otherwise branch on the sign of every element (half of
// them mispredicted); a GPU selects without branching anyway.
RT_HD float positive_part(float cond, float v) {
#if defined(__CUDA_ARCH__)
  return cond > 0.0f ? v : 0.0f;
#else
  std::uint32_t bits;
  std::memcpy(&bits, &v, sizeof bits);
  bits &= 0u - static_cast<std::uint32_t>(cond > 0.0f);
  float out;
  std::memcpy(&out, &bits, sizeof out);
  return out;
#endif
}

// v as the unfused plan reads it back after storing it as T.
template <typename T>
RT_HD float through_storage(float v) {
  T word[1];
  store(word, 0, v);
  return load(static_cast<const T*>(word), 0);
}

// relu(bn(x)) or, with a residual, relu(bn(x) + residual): BatchNorm's y
// rounded as batch_norm_forward stores it (on precision's grid, then as T),
// the add as sum_two_stored computes it (axpy_element with scale 1; the sum
// commutes, so which input of the add BatchNorm was does not matter).
template <typename T>
RT_HD float bn_relu_forward_element(float x, float mean, float invstd, const float* gamma,
                                    const float* beta, int c, DType precision, bool has_residual,
                                    float residual) {
  float v = through_storage<T>(
      round_to_precision_grid(bn_apply_element(x, mean, invstd, gamma, beta, c), precision));
  if (has_residual) v = through_storage<T>(axpy_element(1.0f, residual, v));
  return positive_part(v, v);  // relu_forward_element(v)
}

// The gradient reaching BatchNorm's output (and the residual): dy where the
// fused output y > 0, else 0, as relu's backward stores it.
RT_HD float bn_relu_masked_dy(float y, float dy) {
  return positive_part(y, dy);  // relu_backward_element(y, dy)
}

}  // namespace ringtrain::kernels
