#include "ringtrain/train/nonfinite_policy.h"

#include <cctype>

#include <fmt/format.h>

#include "ringtrain/core/check.h"

namespace ringtrain {

NonfinitePolicy NonfinitePolicy::parse(const std::string& flag) {
  NonfinitePolicy p;
  if (flag == "stop") return p;
  const std::string prefix = "skip:";
  const std::string digits = flag.rfind(prefix, 0) == 0 ? flag.substr(prefix.size()) : "";
  bool ok = !digits.empty() && digits.size() <= 9;
  for (char c : digits) ok = ok && std::isdigit(static_cast<unsigned char>(c));
  RT_CHECK(ok && std::stoull(digits) >= 1,
           "--nonfinite: unknown value '{}' (expected stop or skip:N with N >= 1)", flag);
  p.max_consecutive_skips = std::stoull(digits);
  return p;
}

std::string NonfinitePolicy::to_string() const {
  return max_consecutive_skips == 0 ? "stop" : fmt::format("skip:{}", max_consecutive_skips);
}

}  // namespace ringtrain
