#include "model/kaiming_init.h"

#include <cmath>

#include "kernels/dropout.cuh"

namespace ringtrain {

void kaiming_normal_fill(float* values, std::size_t count, std::size_t fan_in, std::uint64_t seed,
                         std::uint64_t tensor_index) {
  if (fan_in == 0) {
    for (std::size_t i = 0; i < count; ++i) values[i] = 0.0f;
    return;
  }
  const double stddev = std::sqrt(2.0 / static_cast<double>(fan_in));
  const std::uint64_t key =
      kernels::mix64(kernels::mix64(seed ^ 0x6B61696D696E67ull) ^ tensor_index);
  constexpr double kTwoPi = 6.283185307179586476925286766559;
  for (std::size_t i = 0; i < count; i += 2) {
    // Two uniforms in (0, 1] from 53-bit draws, two normals from one Box-Muller.
    const std::uint64_t h1 = kernels::mix64(key ^ (2 * i + 1));
    const std::uint64_t h2 = kernels::mix64(key ^ (2 * i + 2));
    const double u1 = (static_cast<double>(h1 >> 11) + 1.0) * 0x1.0p-53;
    const double u2 = static_cast<double>(h2 >> 11) * 0x1.0p-53;
    const double r = std::sqrt(-2.0 * std::log(u1));
    values[i] = static_cast<float>(stddev * r * std::cos(kTwoPi * u2));
    if (i + 1 < count) values[i + 1] = static_cast<float>(stddev * r * std::sin(kTwoPi * u2));
  }
}

}  // namespace ringtrain
