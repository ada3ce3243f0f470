// The layer interface: forward and backward over a batch of NCHW (or [N, F])
// float activations on the compute context's device. Most layers read one
// input; a layer of several (add, concat) overrides forward_many/backward_many. The built-in layers
// implement it, and so can a user's own layer type: register it
// (ringtrain/model/layer_registry.h) and name it in a model spec like a
// built-in one. Check a new layer's backward with
// ringtrain/model/gradient_check.h.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "ringtrain/tensor/shape.h"

namespace ringtrain {

class BatchStatReducer;  // ringtrain/ops/batch_norm.h

// A parameter tensor a layer asks for; the model places it in the flat buffer.
struct ParamDesc {
  std::string name;  // "weight", "bias"
  Shape shape;
  std::size_t fan_in = 0;  // Kaiming std = sqrt(2 / fan_in); 0 means `constant`
  float constant = 0.0f;   // the initial value when fan_in is 0 (a norm's scale starts at 1)
};

// The seed and the (rank, step) that dropout masks are drawn from.
struct DropoutContext {
  std::uint64_t seed = 0, rank = 0, step = 0;
};

class Layer {
 public:
  virtual ~Layer() = default;

  const std::string& name() const { return name_; }
  const Shape& input_shape() const { return input_; }    // per sample (the first input's)
  const Shape& output_shape() const { return output_; }  // per sample
  virtual std::vector<ParamDesc> param_descs() const { return {}; }
  // State that is not trained (BatchNorm's running statistics): kept in the
  // model's flat buffer of non-trainable state, saved in checkpoints, made the
  // same on every rank, never given gradients. `constant` is its initial value.
  virtual std::vector<ParamDesc> buffer_descs() const { return {}; }
  virtual void bind_buffers(float* buffers) { (void)buffers; }
  // Batch statistics summed over the ranks (--sync-bn); null: this rank's.
  // Only layers with batch statistics (BatchNorm) use it.
  virtual void set_batch_stat_reducer(BatchStatReducer* reducer) { (void)reducer; }
  // Points the layer at its parameters and gradients, in param_descs() order
  // and contiguous, inside the model's flat buffers.
  virtual void bind(float* params, float* grads) {
    (void)params;
    (void)grads;
  }
  // A view layer (flatten) has y == x: the model gives it no buffer of its own
  // and passes gradients straight through.
  virtual bool is_view() const { return false; }
  // A layer whose weights feed a matrix product (convolution, linear): under
  // --precision bf16|fp16 it is bound to a low-precision copy of its weights
  // (ringtrain/ops/precision.h); other layers (norms) keep reading fp32.
  virtual bool matmul_weights() const { return false; }

  virtual void forward(const float* x, float* y, std::size_t batch, bool training) = 0;
  // Writes dx (when not null), and the parameter gradients: overwritten, or
  // added to when accumulate. x and y are those of the matching forward.
  virtual void backward(const float* x, const float* y, const float* dy, float* dx,
                        std::size_t batch, bool accumulate) = 0;

  // Several inputs: xs[i] per input, dxs[i] (each may be null) overwritten.
  // The defaults serve a one-input layer.
  virtual bool takes_many_inputs() const { return false; }
  virtual void forward_many(const std::vector<const float*>& xs, float* y, std::size_t batch,
                            bool training) {
    forward(xs.at(0), y, batch, training);
  }
  virtual void backward_many(const std::vector<const float*>& xs, const float* y, const float* dy,
                             const std::vector<float*>& dxs, std::size_t batch, bool accumulate) {
    backward(xs.at(0), y, dy, dxs.at(0), batch, accumulate);
  }

 protected:
  Layer(std::string name, const Shape& input, const Shape& output)
      : name_(std::move(name)), input_(input), output_(output) {}

 private:
  std::string name_;
  Shape input_, output_;
};

}  // namespace ringtrain
