// The median of a sample: the statistic the step profile, the straggler
// monitor and the training windows report, because one slow step of a shared
// machine moves a mean but not a median.
#pragma once

#include <algorithm>
#include <vector>

namespace ringtrain {

// 0 for an empty sample; the mean of the middle two for an even count.
inline double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace ringtrain
