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
#include <type_traits>

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

// dy where the output's gradient comes in two terms (a ResNet block's
// output, read by the next block's convolution and its residual add): the
// first term, written into dy's buffer, plus the second, left beside it,
// rounded to T as the model's sum_two_stored would have stored their sum
// (axpy_element with scale 1; ops/merge.h), so the passes that read dy read
// both terms instead of a pass writing their sum first.
template <typename T>
RT_HD float summed_dy(float dy, float addend) {
  return through_storage<T>(axpy_element(1.0f, addend, dy));
}

// The gradient reaching BatchNorm's output (and the residual): dy where the
// fused output y > 0, else 0, as relu's backward stores it.
RT_HD float bn_relu_masked_dy(float y, float dy) {
  return positive_part(y, dy);  // relu_backward_element(y, dy)
}

// Half the smallest positive value of storage type T (+0 for fp32): round to
// nearest even takes a positive value to +0 exactly when it is at most this
// (a tie goes to the even 0).
template <typename T>
RT_HD constexpr float rounds_to_zero_up_to() {
  if constexpr (std::is_same_v<T, bf16_word>) return 0x1p-134f;  // bf16: 2^-133
  if constexpr (std::is_same_v<T, f16_word>) return 0x1p-25f;    // fp16: 2^-24
  return 0.0f;
}

// For backward's mask: y (T's stored output of relu(bn(x)), no residual) or,
// y null, a value of y's sign (1 or 0) from x again, without y's roundings.
// y = relu(round(a)) for BatchNorm's value a, rounded once to T (the
// precision's grid is T's own: the op checks), so y > 0 exactly when
// a > rounds_to_zero_up_to<T>(); relu takes NaN to 0, and NaN fails the
// comparison too. The same inputs (x, the saved statistics, gamma and beta,
// which no step changes between a forward and its backward) give the same
// a: y's mask, bit for bit, and fp16's software rounding (about 20
// instructions) is not taken twice an element.
template <typename T>
RT_HD float bn_relu_output_sign(const T* y, std::size_t at, float x, float mean, float invstd,
                                const float* gamma, const float* beta, int c) {
  if (y != nullptr) return load(y, at);
  return bn_apply_element(x, mean, invstd, gamma, beta, c) > rounds_to_zero_up_to<T>() ? 1.0f
                                                                                       : 0.0f;
}

}  // namespace ringtrain::kernels
