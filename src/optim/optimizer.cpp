#include "ringtrain/optim/optimizer.h"

#include <cmath>

#include "optim/adamw.h"
#include "optim/sgd.h"
#include "ringtrain/core/check.h"
#include "ringtrain/launch/gpu_runtime.h"

namespace ringtrain {

Optimizer::~Optimizer() = default;

std::size_t Optimizer::state_bytes() const {
  std::size_t bytes = 0;
  // state() hands out writable views; counting them changes nothing.
  for (const NamedBuffer& s : const_cast<Optimizer*>(this)->state()) bytes += s.view.bytes();
  return bytes;
}

std::size_t state_values_per_parameter(const OptimizerConfig& config) {
  if (config.kind == "adamw") return 2;
  return config.momentum > 0.f ? 1 : 0;
}

void validate(const OptimizerConfig& config) {
  RT_CHECK(config.kind == "sgd" || config.kind == "adamw",
           "unknown optimizer '{}' (--optimizer): expected sgd or adamw", config.kind);
  RT_CHECK(std::isfinite(config.weight_decay) && config.weight_decay >= 0.f,
           "--weight-decay must be finite and >= 0, got {}", config.weight_decay);
  if (config.kind == "sgd") {
    // momentum 1 would never forget a gradient; the buffer grows without bound.
    RT_CHECK(config.momentum >= 0.f && config.momentum < 1.f,
             "--momentum must be in [0, 1), got {}", config.momentum);
    RT_CHECK(!config.nesterov || config.momentum > 0.f,
             "--nesterov needs --momentum > 0, got --momentum {}", config.momentum);
  } else {
    RT_CHECK(!config.nesterov, "--nesterov applies to --optimizer sgd only, not {}", config.kind);
    RT_CHECK(config.beta1 >= 0.f && config.beta1 < 1.f, "--beta1 must be in [0, 1), got {}",
             config.beta1);
    RT_CHECK(config.beta2 >= 0.f && config.beta2 < 1.f, "--beta2 must be in [0, 1), got {}",
             config.beta2);
    RT_CHECK(std::isfinite(config.eps) && config.eps > 0.f, "--eps must be finite and > 0, got {}",
             config.eps);
  }
}

std::unique_ptr<Optimizer> make_optimizer(const OptimizerConfig& config, std::size_t param_count,
                                          Device device) {
  validate(config);
  if (device.is_cuda()) {
    RT_CHECK(cuda_compiled(),
             "optimizer '{}' on {} was requested, but this ringtrain was built without CUDA",
             config.kind, device_name(device));
    RT_CHECK(device.index >= 0, "optimizer '{}': invalid CUDA device index {}", config.kind,
             device.index);
  }
  if (config.kind == "sgd") return std::make_unique<SgdOptimizer>(config, param_count, device);
  return std::make_unique<AdamWOptimizer>(config, param_count, device);
}

}  // namespace ringtrain
