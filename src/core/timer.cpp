#include "ringtrain/core/timer.h"

namespace ringtrain {

double monotonic_seconds() {
  static const auto origin = std::chrono::steady_clock::now();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - origin).count();
}

}  // namespace ringtrain
