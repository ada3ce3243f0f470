// SGD with optional momentum, Nesterov and L2 weight decay (PyTorch semantics,
// dampening 0), over one flat f32 buffer. Internal: make_optimizer builds it.
#pragma once

#include "optim/state_buffer.h"
#include "ringtrain/optim/optimizer.h"

namespace ringtrain {

class SgdOptimizer final : public Optimizer {
 public:
  SgdOptimizer(const OptimizerConfig& config, std::size_t param_count, Device device);
  void step(BufferView params, BufferView grads, float lr) override;
  std::vector<NamedBuffer> state() override;
  std::uint64_t step_count() const override { return steps_; }
  void set_step_count(std::uint64_t steps) override { steps_ = steps; }
  void set_decay_mask(BufferView mask) override;

 private:
  float momentum_;
  bool nesterov_;
  float weight_decay_;
  std::size_t param_count_;
  Device device_;
  StateBuffer momentum_buf_;  // empty for plain SGD
  BufferView decay_mask_;     // --no-decay; empty: every element decays
  std::uint64_t steps_ = 0;
};

}  // namespace ringtrain
