#include "optim/adamw.h"

#include <cmath>

#if defined(__SSE__)
#include <xmmintrin.h>
#endif

#include "kernels/decay_mask.cuh"
#include "optim/cuda_backend.h"
#include "optim/step_arguments.h"

namespace ringtrain {

namespace {

// out[i] = sqrt(in[i]). Under the default -fmath-errno g++ will not vectorise
// a sqrt loop (negative input must set errno), which made the whole AdamW loop
// scalar and ~4x slower; sqrtps is the same correctly rounded IEEE sqrt.
void sqrt_block(const float* __restrict in, float* __restrict out, std::size_t n) {
  std::size_t i = 0;
#if defined(__SSE__)
  for (; i + 4 <= n; i += 4) _mm_storeu_ps(out + i, _mm_sqrt_ps(_mm_loadu_ps(in + i)));
#endif
  for (; i < n; ++i) out[i] = std::sqrt(in[i]);
}

// One pass over the buffer in L1-sized chunks: moments (vectorised), their
// square roots, then the parameters (vectorised), all from adamw.cuh.
void adamw_cpu(float* __restrict p, const float* __restrict g, float* __restrict m,
               float* __restrict v, std::size_t n, const kernels::AdamWCoefficients c,
               const float* __restrict mask) {
  const kernels::AdamWCoefficients exempt = kernels::adamw_without_decay(c);
  constexpr std::size_t kChunk = 1024;
  alignas(64) float root[kChunk];
  for (std::size_t begin = 0; begin < n; begin += kChunk) {
    const std::size_t len = n - begin < kChunk ? n - begin : kChunk;
    float* __restrict pc = p + begin;
    const float* __restrict gc = g + begin;
    float* __restrict mc = m + begin;
    float* __restrict vc = v + begin;
    for (std::size_t i = 0; i < len; ++i) kernels::adamw_moments(gc[i], mc[i], vc[i], c);
    sqrt_block(vc, root, len);
    if (mask == nullptr) {
      for (std::size_t i = 0; i < len; ++i) pc[i] = kernels::adamw_param(pc[i], mc[i], root[i], c);
    } else {
      // The decayed and the exempt update, selected: the loop stays vectorised.
      const float* __restrict mk = mask + begin;
      for (std::size_t i = 0; i < len; ++i)
        pc[i] = kernels::decay_select(mk, i, kernels::adamw_param(pc[i], mc[i], root[i], c),
                                      kernels::adamw_param(pc[i], mc[i], root[i], exempt));
    }
  }
}

}  // namespace

AdamWOptimizer::AdamWOptimizer(const OptimizerConfig& config, std::size_t param_count,
                               Device device)
    : beta1_(config.beta1),
      beta2_(config.beta2),
      eps_(config.eps),
      weight_decay_(config.weight_decay),
      param_count_(param_count),
      device_(device),
      exp_avg_(param_count, device),
      exp_avg_sq_(param_count, device) {}

kernels::AdamWCoefficients AdamWOptimizer::coefficients(std::uint64_t t, float lr) const {
  const double b1 = beta1_;
  const double b2 = beta2_;
  kernels::AdamWCoefficients c;
  c.beta1 = beta1_;
  c.beta2 = beta2_;
  c.one_minus_beta1 = static_cast<float>(1.0 - b1);
  c.one_minus_beta2 = static_cast<float>(1.0 - b2);
  c.eps = eps_;
  c.decay_factor = static_cast<float>(1.0 - static_cast<double>(lr) * weight_decay_);
  c.lr = lr;
  kernels::adamw_bias_correction(c, t);
  return c;
}

void AdamWOptimizer::step(BufferView params, BufferView grads, float lr) {
  check_step_arguments("adamw", params, grads, param_count_, device_, lr);
  const kernels::AdamWCoefficients c = coefficients(steps_ + 1, lr);
  // Weight decay 0 needs no mask: every element is exempt already.
  const float* mask = weight_decay_ != 0.f ? decay_mask_.as<const float>() : nullptr;
  if (device_.is_cuda())
    optim_cuda::adamw_step(params, grads, exp_avg_.data(), exp_avg_sq_.data(), c, mask, gate_,
                           stream_);
  else
    adamw_cpu(params.as<float>(), grads.as<float>(), exp_avg_.data(), exp_avg_sq_.data(),
              param_count_, c, mask);
  ++steps_;
}

void AdamWOptimizer::set_decay_mask(BufferView mask) {
  check_decay_mask("adamw", mask, param_count_, device_);
  decay_mask_ = mask;
}

std::vector<NamedBuffer> AdamWOptimizer::state() {
  return {{"exp_avg", exp_avg_.view()}, {"exp_avg_sq", exp_avg_sq_.view()}};
}

}  // namespace ringtrain
