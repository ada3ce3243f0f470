// What the fusion tests share: a model's buffers as bit patterns, how many
// elements two of them differ in, and a node found by name. A fused plan must
// give the unfused plan's bits, so they compare words, not values.
#pragma once

#include <catch2/catch.hpp>

#include <algorithm>
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

}  // namespace ringtrain::test
