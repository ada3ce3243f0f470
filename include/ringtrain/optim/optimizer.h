// Optimizers over the flat f32 parameter and gradient buffers. One step is one
// fused pass (CPU) or one kernel (CUDA) over the whole buffer; the state
// (momentum, Adam moments) lives in flat buffers of the same length, so a
// checkpoint saves and restores it as plain arrays.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ringtrain/core/buffer_view.h"
#include "ringtrain/core/device.h"

namespace ringtrain {

namespace kernels {
struct NonfiniteGuardState;
}

struct OptimizerConfig {
  std::string kind = "sgd";  // sgd | adamw
  float momentum = 0.9f;     // sgd: 0 means plain SGD, no state buffer
  bool nesterov = false;     // sgd with momentum > 0 only
  // sgd: L2 penalty added to the gradient (PyTorch SGD). adamw: decoupled decay,
  // p *= 1 - lr * weight_decay before the Adam update (Loshchilov & Hutter).
  float weight_decay = 0.f;
  float beta1 = 0.9f, beta2 = 0.999f, eps = 1e-8f;  // adamw
};

// A state buffer and the name a checkpoint stores it under. The view is
// writable: a resume copies the saved array into it.
struct NamedBuffer {
  std::string name;
  BufferView view;
};

class Optimizer {
 public:
  virtual ~Optimizer();
  // One update of `params` (in place) from `grads` at learning rate `lr`. Both
  // are f32 views of param_count elements on the optimizer's device. On CUDA it
  // is queued on the stream of set_stream and does not wait for the kernel.
  virtual void step(BufferView params, BufferView grads, float lr) = 0;
  // {"momentum"} for SGD with momentum, {} for plain SGD, {"exp_avg",
  // "exp_avg_sq"} for AdamW. Views stay valid for the optimizer's lifetime.
  virtual std::vector<NamedBuffer> state() = 0;
  // Steps taken so far; AdamW's bias correction depends on it, so a resume
  // restores it together with the state buffers.
  virtual std::uint64_t step_count() const = 0;
  virtual void set_step_count(std::uint64_t steps) = 0;
  // Bytes of optimizer state this rank holds (momentum, moments): what
  // --zero 1 divides by the world size.
  virtual std::size_t state_bytes() const;
  // --no-decay: weight decay applies to element i scaled by mask[i] (an f32
  // view of 0s and 1s, param_count elements on the optimizer's device, kept
  // by the optimizer); without a mask every element decays.
  virtual void set_decay_mask(BufferView mask) = 0;

  // On a CUDA device the --nonfinite decision is taken on the device
  // (src/optim/nonfinite_tracker.h): with a gate, every later step is queued
  // as usual but is a no-op there unless gate->apply, and AdamW's bias
  // correction counts only the applied steps. step_count() then counts the
  // steps issued. nullptr: no gate (the CPU path skips the call instead).
  void set_update_gate(const kernels::NonfiniteGuardState* gate) { gate_ = gate; }
  // The CUDA stream (cudaStream_t as void*) the updates are queued on: the
  // model's, which computed the gradients, so that the order is the stream's
  // and not the legacy default stream's implicit one (which holds only while
  // every stream involved is a blocking one). nullptr: the default stream.
  virtual void set_stream(void* stream) { stream_ = stream; }

 protected:
  const kernels::NonfiniteGuardState* gate_ = nullptr;
  void* stream_ = nullptr;
};

// Validates `config` and allocates zeroed state for param_count elements on
// `device`. A CUDA device in a CPU-only build is an Error.
std::unique_ptr<Optimizer> make_optimizer(const OptimizerConfig& config, std::size_t param_count,
                                          Device device);

// State values the optimizer keeps per parameter: 0 for plain SGD, 1 with
// momentum, 2 for AdamW (what `model show` reports before any allocation).
std::size_t state_values_per_parameter(const OptimizerConfig& config);

// Throws Error naming the flag and the bad value (--optimizer, --momentum,
// --nesterov, --weight-decay, --beta1, --beta2, --eps).
void validate(const OptimizerConfig& config);

}  // namespace ringtrain
