// Progress lines on stderr for converters working on large inputs: at most one
// line a second, plus a final one.
#pragma once

#include <cstdio>
#include <string>

#include "ringtrain/core/timer.h"

namespace ringtrain {

class ConvertProgress {
 public:
  ConvertProgress(std::string label, std::size_t total, bool enabled)
      : label_(std::move(label)), total_(total), enabled_(enabled) {}
  void update(std::size_t done) {
    if (!enabled_ || (done < total_ && since_.seconds() < 1.0)) return;
    since_.reset();
    std::fprintf(stderr, "convert: %s %zu/%zu samples (%.0f%%, %.1f s)\n", label_.c_str(), done,
                 total_,
                 total_ ? 100.0 * static_cast<double>(done) / static_cast<double>(total_) : 100.0,
                 elapsed_.seconds());
    std::fflush(stderr);
  }

 private:
  std::string label_;
  std::size_t total_;
  bool enabled_;
  Stopwatch since_, elapsed_;
};

// Inputs above this many bytes report progress.
inline constexpr std::size_t kProgressBytes = 16u << 20;

}  // namespace ringtrain
