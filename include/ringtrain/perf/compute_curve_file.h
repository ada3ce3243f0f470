// The compute curve `ringtrain bench predict --compute-curve` reads: the
// output of `ringtrain bench step --json`, one object per line, one line per
// measured batch, e.g.
//   {"model": "cnn", "batch": 48, "step_ms": 62.7, ...}
//   {"model": "cnn", "batch": 96, "step_ms": 120.4, ...}
#pragma once

#include <string>

#include "ringtrain/perf/compute_curve.h"

namespace ringtrain {

struct LoadedComputeCurve {
  ComputeCurve curve;
  std::string model;  // the model every line measured
};
// Throws Error naming the file and line: unreadable, not JSON, no batch or
// step_ms, lines of different models, or bad points (compute_curve.h).
LoadedComputeCurve read_compute_curve_file(const std::string& path);

}  // namespace ringtrain
