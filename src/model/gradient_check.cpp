// Central-difference gradient check of one layer (gradient_check.h). The sums
// are in double so that only the layer's own float rounding shows.
#include "ringtrain/model/gradient_check.h"

#include <cmath>
#include <vector>

#include <fmt/format.h>

#include "ringtrain/core/check.h"

namespace ringtrain {

namespace {

// SplitMix64 values in [lo, hi): the same inputs on every machine.
std::vector<float> seeded_values(std::uint64_t seed, std::size_t n, float lo, float hi) {
  std::vector<float> v(n);
  std::uint64_t state = seed * 0x9E3779B97F4A7C15ull + 0x632BE59BD9B4E019ull;
  for (float& x : v) {
    state += 0x9E3779B97F4A7C15ull;
    std::uint64_t z = state;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    const double u = static_cast<double>(z >> 11) * 0x1.0p-53;
    x = static_cast<float>(lo + (hi - lo) * u);
  }
  return v;
}

}  // namespace

GradientCheckResult check_layer_gradients(Layer& layer, const GradientCheckOptions& o) {
  RT_CHECK(o.batch > 0 && o.eps > 0, "gradient check of {}: batch and eps must be positive",
           layer.name());
  std::size_t n_params = 0;
  for (const ParamDesc& d : layer.param_descs()) n_params += d.shape.numel();
  std::vector<float> params = seeded_values(o.seed + 1, n_params, -0.5f, 0.5f);
  std::vector<float> grads(n_params, 0.0f);
  layer.bind(params.data(), grads.data());
  // Non-trainable state (running statistics) at its initial values.
  std::vector<float> buffers;
  for (const ParamDesc& d : layer.buffer_descs())
    buffers.insert(buffers.end(), d.shape.numel(), d.constant);
  if (!buffers.empty()) layer.bind_buffers(buffers.data());

  std::vector<float> x = seeded_values(o.seed + 2, o.batch * layer.input_shape().numel(), -1, 1);
  const std::size_t out_n = o.batch * layer.output_shape().numel();
  const std::vector<float> r = seeded_values(o.seed + 3, out_n, -1, 1);
  std::vector<float> y(out_n), dx(x.size(), 0.0f);

  auto loss = [&](const std::vector<float>& input) {
    std::vector<float> out(out_n);
    layer.forward(input.data(), out.data(), o.batch, true);
    double s = 0;
    for (std::size_t i = 0; i < out_n; ++i) s += static_cast<double>(out[i]) * r[i];
    return s;
  };

  layer.forward(x.data(), y.data(), o.batch, true);
  layer.backward(x.data(), y.data(), r.data(), dx.data(), o.batch, false);
  const std::vector<float> analytic_grads = grads;

  GradientCheckResult result;
  auto compare = [&](double analytic, double numeric, const std::string& what) {
    ++result.checked;
    const double err = std::abs(analytic - numeric);
    result.max_abs_error = std::max(result.max_abs_error, err);
    if (err > o.atol + o.rtol * std::abs(numeric)) {
      if (result.mismatches < 10)
        result.report += fmt::format("{} {}: backward gives {:.6g}, finite difference {:.6g}\n",
                                     layer.name(), what, analytic, numeric);
      ++result.mismatches;
    }
  };

  for (std::size_t i = 0; i < x.size(); ++i) {
    std::vector<float> xp = x, xm = x;
    xp[i] += o.eps;
    xm[i] -= o.eps;
    compare(dx[i], (loss(xp) - loss(xm)) / (2.0 * o.eps), fmt::format("dx[{}]", i));
  }
  std::size_t at = 0;
  for (const ParamDesc& d : layer.param_descs()) {
    for (std::size_t j = 0; j < d.shape.numel(); ++j, ++at) {
      const float keep = params[at];
      params[at] = keep + o.eps;
      const double lp = loss(x);
      params[at] = keep - o.eps;
      const double lm = loss(x);
      params[at] = keep;
      compare(analytic_grads[at], (lp - lm) / (2.0 * o.eps), fmt::format("d{}[{}]", d.name, j));
    }
  }
  result.ok = result.mismatches == 0;
  if (!result.ok)
    result.report += fmt::format("{} of {} elements differ (largest error {:.3g})\n",
                                 result.mismatches, result.checked, result.max_abs_error);
  return result;
}

}  // namespace ringtrain
