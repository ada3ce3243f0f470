// What the fusion tests share: a model's buffers as bit patterns, how many
// elements two of them differ in, a node found by name (a fused plan must
// give the unfused plan's bits, so they compare words, not values), and the
// finite-difference check of a fused plan's gradients.
#pragma once

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "ringtrain/core/buffer_view.h"
#include "ringtrain/model/model.h"

namespace ringtrain::test {

inline std::vector<std::uint32_t> bits_of(const float* p, std::size_t n) {
  std::vector<std::uint32_t> b(n);
  std::memcpy(b.data(), p, n * sizeof(float));
  return b;
}
inline std::vector<std::uint32_t> bits_of(const BufferView& v) {
  return bits_of(static_cast<const float*>(v.ptr), v.count);
}

// The number of elements whose bits differ (a size mismatch counts as more).
inline std::size_t differing(const std::vector<std::uint32_t>& a,
                             const std::vector<std::uint32_t>& b) {
  std::size_t n = a.size() == b.size() ? 0 : 1 + a.size() + b.size();
  for (std::size_t i = 0; i < std::min(a.size(), b.size()); ++i) n += a[i] != b[i];
  return n;
}

inline std::size_t node_named(const Model& m, const std::string& name) {
  for (std::size_t i = 0; i < m.layer_count(); ++i)
    if (m.layer_name(i) == name) return i;
  FAIL("no node " << name);
  return 0;
}

// Two plans' first n logits and their parameter gradients, bit for bit.
inline void check_same_logits_and_grads(Model& a, Model& b, std::size_t n) {
  std::vector<float> la(n), lb(n);
  a.copy_logits(0, la.data(), n);
  b.copy_logits(0, lb.data(), n);
  CHECK(differing(bits_of(la.data(), n), bits_of(lb.data(), n)) == 0);
  CHECK(differing(bits_of(a.grads()), bits_of(b.grads())) == 0);
}

// Central differences of the mean training loss over every parameter of an
// fp32 model, starting from `init`, against its backward's gradient. The
// step is small, so that few pre-activations cross a kink (relu).
inline void check_parameter_gradients(Model& m, const std::vector<float>& init,
                                      const std::vector<float>& x,
                                      const std::vector<std::int32_t>& labels) {
  const std::size_t batch = labels.size();
  float* params = static_cast<float*>(m.params().ptr);
  std::copy(init.begin(), init.end(), params);
  const auto loss = [&] {
    return m.forward(x.data(), labels.data(), batch, true).loss_sum / static_cast<double>(batch);
  };
  loss();
  m.backward(1.0f, false);
  const std::vector<float> grads(static_cast<float*>(m.grads().ptr),
                                 static_cast<float*>(m.grads().ptr) + m.param_count());
  const float eps = 2e-3f;
  for (std::size_t i = 0; i < m.param_count(); ++i) {
    params[i] = init[i] + eps;
    const double lp = loss();
    params[i] = init[i] - eps;
    const double lm = loss();
    params[i] = init[i];
    const double numeric = (lp - lm) / (2.0 * eps);
    INFO("parameter " << i << ": analytic " << grads[i] << " vs numeric " << numeric);
    CHECK(std::abs(grads[i] - numeric) <= 2e-3 + 3e-2 * std::abs(numeric));
  }
}

}  // namespace ringtrain::test
