#include "ringtrain/train/divergence_monitor.h"

#include <cmath>

#include <fmt/format.h>

#include "core/median.h"

namespace ringtrain {

std::optional<std::string> DivergenceMonitor::observe(std::uint64_t step, double loss) {
  if (!std::isfinite(loss)) return std::nullopt;  // the --nonfinite guard's case
  std::optional<std::string> message;
  if (!recent_.empty()) {
    const double med = median(recent_);
    const double factor = med > 0 ? loss / med : 0;
    if (factor >= kDivergenceFactor && loss - med > kDivergenceMargin &&
        factor >= warned_factor_ * 10) {
      warned_factor_ = factor;
      message = fmt::format(
          "loss diverging at step {}: loss {:.4g} is {:.3g}x the median {:.4g} of the last {} "
          "logged losses (lower --lr, add --warmup or --clip-norm)",
          step, loss, factor, med, recent_.size());
    }
  }
  recent_.push_back(loss);
  if (recent_.size() > kDivergenceWindow) recent_.erase(recent_.begin());
  return message;
}

}  // namespace ringtrain
