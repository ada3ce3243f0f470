// Layer normalisation over each sample's features, a layer ringtrain does not
// have built in: y = gamma * (x - mean) / sqrt(var + eps) + beta, with gamma
// and beta per feature. CPU only.
#pragma once

#include <memory>

#include "ringtrain/model/layer_registry.h"

namespace example {

class LayerNorm final : public ringtrain::Layer {
 public:
  LayerNorm(std::string name, const ringtrain::Shape& input, float eps);
  std::vector<ringtrain::ParamDesc> param_descs() const override;
  void bind(float* params, float* grads) override;
  void forward(const float* x, float* y, std::size_t batch, bool training) override;
  void backward(const float* x, const float* y, const float* dy, float* dx, std::size_t batch,
                bool accumulate) override;

 private:
  std::size_t features_;
  float eps_;
  float* gamma_ = nullptr;
  float* beta_ = nullptr;
  float* dgamma_ = nullptr;
  float* dbeta_ = nullptr;
};

// The registry entry: `layernorm` or `layernorm(eps=1e-5)` in a model spec.
ringtrain::LayerType layernorm_type();

}  // namespace example
