// A loss that stays finite but explodes (a ReLU MLP at --lr 1e6 reaches loss
// 1.7e6 and trains on silently) is named: each logged training loss (the same
// on every rank, summed over them) is compared with the median of the recent
// logged losses, and one that is kDivergenceFactor times that median (and
// more than kDivergenceMargin above it, so a tiny loss's noise does not
// count) is diverging. The --nonfinite guard handles NaN and Inf; this one
// sees only finite losses. The monitor reads nothing from the device: it
// sees the losses the progress line already read (--log-every).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace ringtrain {

inline constexpr double kDivergenceFactor = 10.0;
inline constexpr double kDivergenceMargin = 1.0;
inline constexpr std::size_t kDivergenceWindow = 20;  // logged losses in the median

class DivergenceMonitor {
 public:
  // A logged loss after `step`. Returns the message ("loss diverging at step
  // S: ...") when it diverges and the user has not just been told: the first
  // time, and again only when the factor over the median has grown tenfold.
  std::optional<std::string> observe(std::uint64_t step, double loss);

 private:
  std::vector<double> recent_;  // the last kDivergenceWindow logged losses
  double warned_factor_ = 0;
};

}  // namespace ringtrain
