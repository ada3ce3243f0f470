// Seeded He (Kaiming) normal initialisation: N(0, 2 / fan_in), the right scale
// for ReLU nets. Each value is a function of (seed, tensor, element) through a
// counter-based hash and Box-Muller, so it does not depend on the order of
// initialisation, on the platform's <random>, or on the rank.
#pragma once

#include <cstddef>
#include <cstdint>

namespace ringtrain {

void kaiming_normal_fill(float* values, std::size_t count, std::size_t fan_in, std::uint64_t seed,
                         std::uint64_t tensor_index);

}  // namespace ringtrain
