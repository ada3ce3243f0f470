// A finite-difference check of a layer's backward, for people writing their
// own layers: it compares dx and every parameter gradient that backward writes
// with central differences of L = sum(y * r) for a fixed random r, element by
// element, on the CPU.
//
//   auto ctx = ringtrain::ComputeContext::create(ringtrain::Device::cpu());
//   auto layer = make_my_layer(..., *ctx);
//   const auto result = ringtrain::check_layer_gradients(*layer);
//   if (!result.ok) std::puts(result.report.c_str());
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "ringtrain/model/layer.h"

namespace ringtrain {

struct GradientCheckOptions {
  std::size_t batch = 2;
  float eps = 1e-2f;  // central-difference step (in float: not much smaller)
  double atol = 2e-3, rtol = 2e-2;
  std::uint64_t seed = 1;  // inputs in [-1, 1], parameters in [-0.5, 0.5], r in [-1, 1]
};

struct GradientCheckResult {
  bool ok = true;
  std::size_t checked = 0;     // elements compared (inputs and parameters)
  std::size_t mismatches = 0;  // elements outside atol + rtol * |numeric|
  double max_abs_error = 0;    // largest |analytic - numeric|
  std::string report;          // the first mismatches, each naming the element
};

// The layer must run on the CPU (its context). It is bound to parameter and
// gradient buffers of the check's own; bind it again before other use.
GradientCheckResult check_layer_gradients(Layer& layer, const GradientCheckOptions& options = {});

}  // namespace ringtrain
