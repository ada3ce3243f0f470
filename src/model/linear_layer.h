#pragma once

#include "model/layer.h"

namespace ringtrain {

class LinearLayer final : public Layer {
 public:
  LinearLayer(std::string name, const Shape& input, std::size_t out, const ComputeContext& ctx);
  bool matmul_weights() const override { return true; }
  std::vector<ParamDesc> param_descs() const override;
  void bind(float* params, float* grads) override;
  void forward(const float* x, float* y, std::size_t batch, bool training) override;
  void backward(const float* x, const float* y, const float* dy, float* dx, std::size_t batch,
                bool accumulate) override;

 private:
  const ComputeContext& ctx_;
  std::size_t in_, out_;
  float *w_ = nullptr, *b_ = nullptr, *dw_ = nullptr, *db_ = nullptr;
};

}  // namespace ringtrain
