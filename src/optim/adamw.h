// AdamW (Adam with decoupled weight decay, Loshchilov & Hutter 2019; PyTorch
// semantics, no amsgrad) over one flat f32 buffer. Internal: make_optimizer
// builds it.
#pragma once

#include "kernels/adamw.cuh"
#include "optim/state_buffer.h"
#include "ringtrain/optim/optimizer.h"

namespace ringtrain {

class AdamWOptimizer final : public Optimizer {
 public:
  AdamWOptimizer(const OptimizerConfig& config, std::size_t param_count, Device device);
  void step(BufferView params, BufferView grads, float lr) override;
  std::vector<NamedBuffer> state() override;
  std::uint64_t step_count() const override { return steps_; }
  void set_step_count(std::uint64_t steps) override { steps_ = steps; }
  void set_decay_mask(BufferView mask) override;

  // The per-step scalars for step number t (1-based) at rate lr, computed in
  // double: bias corrections 1 - beta^t lose all precision in float for large t.
  kernels::AdamWCoefficients coefficients(std::uint64_t t, float lr) const;

 private:
  float beta1_, beta2_, eps_, weight_decay_;
  std::size_t param_count_;
  Device device_;
  StateBuffer exp_avg_;
  StateBuffer exp_avg_sq_;
  BufferView decay_mask_;  // --no-decay; empty: every element decays
  std::uint64_t steps_ = 0;
};

}  // namespace ringtrain
