#include "layernorm.h"

#include <cmath>

namespace example {

LayerNorm::LayerNorm(std::string name, const ringtrain::Shape& input, float eps)
    : Layer(std::move(name), input, input), features_(input.numel()), eps_(eps) {}

std::vector<ringtrain::ParamDesc> LayerNorm::param_descs() const {
  // The scale starts at 1 and the shift at 0 (fan_in 0: a constant).
  return {{"gamma", ringtrain::Shape{features_}, 0, 1.0f},
          {"beta", ringtrain::Shape{features_}, 0, 0.0f}};
}

void LayerNorm::bind(float* params, float* grads) {
  gamma_ = params;
  beta_ = params + features_;
  dgamma_ = grads;
  dbeta_ = grads + features_;
}

void LayerNorm::forward(const float* x, float* y, std::size_t batch, bool) {
  const std::size_t f = features_;
  for (std::size_t n = 0; n < batch; ++n) {
    const float* xs = x + n * f;
    double mean = 0, var = 0;
    for (std::size_t i = 0; i < f; ++i) mean += xs[i];
    mean /= static_cast<double>(f);
    for (std::size_t i = 0; i < f; ++i) var += (xs[i] - mean) * (xs[i] - mean);
    const double inv = 1.0 / std::sqrt(var / static_cast<double>(f) + eps_);
    for (std::size_t i = 0; i < f; ++i)
      y[n * f + i] = static_cast<float>(gamma_[i] * (xs[i] - mean) * inv + beta_[i]);
  }
}

void LayerNorm::backward(const float* x, const float*, const float* dy, float* dx,
                         std::size_t batch, bool accumulate) {
  const std::size_t f = features_;
  if (!accumulate)
    for (std::size_t i = 0; i < f; ++i) dgamma_[i] = dbeta_[i] = 0.0f;
  std::vector<double> xhat(f);
  for (std::size_t n = 0; n < batch; ++n) {
    const float* xs = x + n * f;
    const float* g = dy + n * f;
    double mean = 0, var = 0;
    for (std::size_t i = 0; i < f; ++i) mean += xs[i];
    mean /= static_cast<double>(f);
    for (std::size_t i = 0; i < f; ++i) var += (xs[i] - mean) * (xs[i] - mean);
    const double inv = 1.0 / std::sqrt(var / static_cast<double>(f) + eps_);
    double mean_gg = 0, mean_ggx = 0;  // means of dy*gamma and dy*gamma*xhat
    for (std::size_t i = 0; i < f; ++i) {
      xhat[i] = (xs[i] - mean) * inv;
      dgamma_[i] += static_cast<float>(g[i] * xhat[i]);
      dbeta_[i] += g[i];
      mean_gg += g[i] * gamma_[i];
      mean_ggx += g[i] * gamma_[i] * xhat[i];
    }
    mean_gg /= static_cast<double>(f);
    mean_ggx /= static_cast<double>(f);
    if (dx != nullptr)
      for (std::size_t i = 0; i < f; ++i)
        dx[n * f + i] = static_cast<float>(inv * (g[i] * gamma_[i] - mean_gg - xhat[i] * mean_ggx));
  }
}

ringtrain::LayerType layernorm_type() {
  ringtrain::LayerType t;
  t.name = "layernorm";
  t.arg_names = {"eps"};
  t.make = [](const ringtrain::LayerArgs& args, const ringtrain::LayerBuild& build) {
    return std::make_unique<LayerNorm>(build.name, build.input,
                                       static_cast<float>(args.number("eps", 1e-5)));
  };
  return t;
}

}  // namespace example
