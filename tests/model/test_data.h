// Deterministic test inputs: a function of (salt, index), never all ones.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/dropout.cuh"

namespace ringtrain::test {

// Uniform in [lo, hi), from a hash of (salt, i).
inline float hashed_uniform(std::uint64_t salt, std::size_t i, float lo, float hi) {
  const std::uint64_t h = kernels::mix64(kernels::mix64(salt) ^ i);
  return lo + (hi - lo) * static_cast<float>(static_cast<double>(h >> 11) * 0x1.0p-53);
}

inline std::vector<float> hashed_vector(std::uint64_t salt, std::size_t n, float lo = -1.0f,
                                        float hi = 1.0f) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = hashed_uniform(salt, i, lo, hi);
  return v;
}

// Values in [-1, 1] kept at least `gap` away from zero (away from ReLU's kink).
inline std::vector<float> away_from_zero(std::uint64_t salt, std::size_t n, float gap) {
  std::vector<float> v = hashed_vector(salt, n);
  for (float& x : v) x = x < 0 ? x - gap : x + gap;
  return v;
}

// Token ids (as the model's float input) and next-token labels in [0, vocab),
// n of each: a function of (salt, index).
inline void hashed_tokens(std::uint64_t salt, std::size_t n, std::size_t vocab,
                          std::vector<float>& ids, std::vector<std::int32_t>& labels) {
  ids.resize(n);
  labels.resize(n);
  const std::vector<float> u = hashed_vector(salt, n + 1, 0.0f, 1.0f);
  for (std::size_t i = 0; i < n; ++i) {
    ids[i] = static_cast<float>(static_cast<std::size_t>(u[i] * vocab) % vocab);
    labels[i] = static_cast<std::int32_t>(static_cast<std::size_t>(u[i + 1] * vocab) % vocab);
  }
}

}  // namespace ringtrain::test
