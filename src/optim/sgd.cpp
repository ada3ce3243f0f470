#include "optim/sgd.h"

#include "kernels/decay_mask.cuh"
#include "kernels/sgd.cuh"
#include "optim/cuda_backend.h"
#include "optim/step_arguments.h"

namespace ringtrain {

namespace {

// One pass over the buffer; __restrict lets the compiler vectorise it.
// (The mask test is a select the compiler vectorises; without a mask the
// loop is the plain one.)
void sgd_plain_cpu(float* __restrict p, const float* __restrict g, std::size_t n, float lr,
                   float weight_decay, const float* __restrict mask) {
  if (mask == nullptr) {
    for (std::size_t i = 0; i < n; ++i)
      p[i] = kernels::sgd_plain_element(p[i], g[i], lr, weight_decay);
    return;
  }
  for (std::size_t i = 0; i < n; ++i)
    p[i] = kernels::sgd_plain_element(p[i], g[i], lr,
                                      kernels::decay_select(mask, i, weight_decay, 0.f));
}

template <bool kNesterov>
void sgd_momentum_cpu(float* __restrict p, const float* __restrict g, float* __restrict buf,
                      std::size_t n, float lr, float momentum, float weight_decay,
                      const float* __restrict mask) {
  if (mask == nullptr) {
    for (std::size_t i = 0; i < n; ++i)
      kernels::sgd_momentum_element<kNesterov>(p[i], g[i], buf[i], lr, momentum, weight_decay);
    return;
  }
  for (std::size_t i = 0; i < n; ++i)
    kernels::sgd_momentum_element<kNesterov>(p[i], g[i], buf[i], lr, momentum,
                                             kernels::decay_select(mask, i, weight_decay, 0.f));
}

}  // namespace

SgdOptimizer::SgdOptimizer(const OptimizerConfig& config, std::size_t param_count, Device device)
    : momentum_(config.momentum),
      nesterov_(config.nesterov),
      weight_decay_(config.weight_decay),
      param_count_(param_count),
      device_(device) {
  if (momentum_ > 0.f) momentum_buf_ = StateBuffer(param_count, device);
}

void SgdOptimizer::step(BufferView params, BufferView grads, float lr) {
  check_step_arguments("sgd", params, grads, param_count_, device_, lr);
  const bool with_momentum = momentum_ > 0.f;
  // Weight decay 0 needs no mask: every element is exempt already.
  const float* mask = weight_decay_ != 0.f ? decay_mask_.as<const float>() : nullptr;
  if (device_.is_cuda()) {
    optim_cuda::sgd_step(params, grads, with_momentum ? momentum_buf_.data() : nullptr, lr,
                         momentum_, weight_decay_, nesterov_, mask, gate_, stream_);
  } else if (!with_momentum) {
    sgd_plain_cpu(params.as<float>(), grads.as<float>(), param_count_, lr, weight_decay_, mask);
  } else if (nesterov_) {
    sgd_momentum_cpu<true>(params.as<float>(), grads.as<float>(), momentum_buf_.data(),
                           param_count_, lr, momentum_, weight_decay_, mask);
  } else {
    sgd_momentum_cpu<false>(params.as<float>(), grads.as<float>(), momentum_buf_.data(),
                            param_count_, lr, momentum_, weight_decay_, mask);
  }
  ++steps_;
}

void SgdOptimizer::set_decay_mask(BufferView mask) {
  check_decay_mask("sgd", mask, param_count_, device_);
  decay_mask_ = mask;
}

std::vector<NamedBuffer> SgdOptimizer::state() {
  if (momentum_ <= 0.f) return {};
  return {{"momentum", momentum_buf_.view()}};
}

}  // namespace ringtrain
