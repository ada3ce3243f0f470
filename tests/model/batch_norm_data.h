// Test data for BatchNorm's statistics: a [n, c, hw] batch stored as f32,
// bf16 or f16 with chosen per-channel means and spread (hard data: mean 1000,
// std 0.01), and float64 two-pass statistics of the stored values.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/dropout.cuh"
#include "kernels/storage.cuh"
#include "ringtrain/core/dtype.h"

namespace ringtrain::test {

// A [n, c, hw] batch stored as dtype t: channel ch's values have mean
// means[ch % size] and standard deviation `stddev` (uniform, from a hash of
// the index); `wide` holds the stored values as fp32.
struct Batch {
  DType t = DType::f32;
  std::size_t n = 0, c = 0, hw = 0;
  std::vector<float> f32;
  std::vector<kernels::bf16_word> bf16;
  std::vector<kernels::f16_word> f16;
  std::vector<float> wide;
  const void* data() const {
    return t == DType::bf16  ? static_cast<const void*>(bf16.data())
           : t == DType::f16 ? static_cast<const void*>(f16.data())
                             : static_cast<const void*>(f32.data());
  }
};

inline Batch make_batch(DType t, std::size_t n, std::size_t c, std::size_t hw,
                        const std::vector<double>& means, double stddev, std::uint64_t salt) {
  Batch b;
  b.t = t;
  b.n = n;
  b.c = c;
  b.hw = hw;
  const std::size_t total = n * c * hw;
  b.wide.resize(total);
  b.f32.resize(total);
  b.bf16.resize(total);
  b.f16.resize(total);
  for (std::size_t i = 0; i < total; ++i) {
    const std::size_t ch = (i / hw) % c;
    const std::uint64_t h = kernels::mix64(kernels::mix64(salt) ^ i);
    const double u = static_cast<double>(h >> 11) * 0x1.0p-53;  // [0, 1)
    const double v = means[ch % means.size()] + stddev * std::sqrt(3.0) * (2.0 * u - 1.0);
    const auto f = static_cast<float>(v);
    kernels::store(b.f32.data(), i, f);
    kernels::store(b.bf16.data(), i, f);
    kernels::store(b.f16.data(), i, f);
    b.wide[i] = t == DType::bf16  ? kernels::load(b.bf16.data(), i)
                : t == DType::f16 ? kernels::load(b.f16.data(), i)
                                  : f;
  }
  return b;
}

// float64 two-pass statistics of rows [row_begin, row_end) of the stored values.
struct Reference {
  std::vector<double> mean, m2;
  double count = 0;
};
inline Reference reference(const Batch& b, std::size_t row_begin, std::size_t row_end) {
  Reference r;
  r.mean.assign(b.c, 0.0);
  r.m2.assign(b.c, 0.0);
  r.count = static_cast<double>((row_end - row_begin) * b.hw);
  for (std::size_t ch = 0; ch < b.c; ++ch) {
    double s = 0;
    for (std::size_t o = row_begin; o < row_end; ++o)
      for (std::size_t i = 0; i < b.hw; ++i) s += b.wide[(o * b.c + ch) * b.hw + i];
    const double m = s / r.count;
    double q = 0;
    for (std::size_t o = row_begin; o < row_end; ++o)
      for (std::size_t i = 0; i < b.hw; ++i) {
        const double d = b.wide[(o * b.c + ch) * b.hw + i] - m;
        q += d * d;
      }
    r.mean[ch] = m;
    r.m2[ch] = q;
  }
  return r;
}

}  // namespace ringtrain::test
