// Test inputs for the optimizer tests: values that depend on (seed, index), never
// all ones, so an element updated from the wrong slot shows up.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace ringtrain::test {

// A value in [-scale, scale), a function of (seed, index) only (splitmix64).
inline float test_value(std::uint64_t seed, std::size_t index, float scale = 1.f) {
  std::uint64_t z = seed * 0x9E3779B97F4A7C15ull + index + 0x632BE59BD9B4E019ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  const double unit = static_cast<double>(z >> 11) / static_cast<double>(1ull << 53);
  return static_cast<float>((2.0 * unit - 1.0) * scale);
}

inline std::vector<float> test_vector(std::uint64_t seed, std::size_t n, float scale = 1.f) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = test_value(seed, i, scale);
  return v;
}

// Sizes around vector widths and a large odd one.
inline const std::vector<std::size_t> kTestSizes = {0, 1, 7, 8, 9, 15, 16, 17, 100003};

}  // namespace ringtrain::test
