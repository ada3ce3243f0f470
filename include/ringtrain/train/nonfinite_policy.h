// --nonfinite: what training does when a step's gradients are NaN or Inf.
#pragma once

#include <cstdint>
#include <string>

namespace ringtrain {

struct NonfinitePolicy {
  // 0: stop at the first bad step ("stop"); N: skip the update of up to N
  // consecutive bad steps, then stop ("skip:N").
  std::uint64_t max_consecutive_skips = 0;

  // Throws Error naming --nonfinite and the value.
  static NonfinitePolicy parse(const std::string& flag);
  std::string to_string() const;
};

}  // namespace ringtrain
