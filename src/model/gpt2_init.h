#pragma once

#include <cstddef>

namespace ringtrain {

// GPT-2's initialisation, N(0, 0.02), through the model's Kaiming fill
// (std = sqrt(2 / fan_in)).
inline constexpr std::size_t kGpt2InitFanIn = 5000;

}  // namespace ringtrain
