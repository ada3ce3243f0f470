// make_layer: a model spec's layer, built-in or registered, as a Layer.
// Internal to the model layer (the trainer sees only Model); tests build
// layers directly for their gradient checks.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "ringtrain/core/buffer_view.h"
#include "ringtrain/model/layer.h"
#include "ringtrain/model/model_spec.h"
#include "ringtrain/ops/compute_context.h"
#include "ringtrain/tensor/layout.h"
#include "ringtrain/tensor/shape.h"

namespace ringtrain {

// A built-in layer that can say which kernels run it, as one line for bench
// step --layers (a convolution: the cuDNN algorithms chosen, or the CPU path).
// A separate interface, not a virtual of Layer: plugins implement Layer, and
// its vtable stays as they were built against.
class DescribesKernels {
 public:
  virtual std::string describe_kernels() const = 0;

 protected:
  ~DescribesKernels() = default;
};

// A built-in layer that reads and writes activations and their gradients in
// the model's storage dtype (fp32, or bf16/fp16 under --precision) itself,
// through typed views (count: elements of the whole batch). The model gives
// it every input, its output and its output's gradient in the storage dtype;
// each dx is in the storage dtype, or fp32 where the model sums several
// contributions (a null ptr: not wanted). A layer without it (a plugin, a
// layer not converted yet) sees fp32: the model widens its inputs and
// narrows what it writes (the adapter). Internal, as DescribesKernels.
class StoresActivations {
 public:
  // Whether this instance takes the typed path (a layer type may store only
  // some of its forms: relu of the activations, a two-input add).
  virtual bool stores_activations() const { return true; }
  // Whether an fp32 dx for input `input` would be its dx in the storage
  // dtype widened, exactly (a convolution's: cuDNN writes the storage dtype,
  // the CPU rounds; a residual's gradient, masked dy). Where the model sums
  // that dx, it asks for it in the storage dtype: widened as it is added to
  // an fp32 sum, or, where both of two contributions are on the grid, summed
  // with the other in 16 bits (the same numbers: one fp32 add, one rounding).
  virtual bool writes_dx_on_grid(std::size_t /*input*/) const { return false; }
  // Whether backward reads input `input`'s values (a residual add's, a
  // position embedding's, a dropout's do not): where no backward reads an
  // output, the model lets later outputs reuse its memory once its last
  // reader's forward has run.
  virtual bool backward_reads_input(std::size_t /*input*/) const { return true; }
  virtual void forward_stored(const std::vector<BufferView>& xs, BufferView y, std::size_t batch,
                              bool training) = 0;
  virtual void backward_stored(const std::vector<BufferView>& xs, BufferView y, BufferView dy,
                               const std::vector<BufferView>& dxs, std::size_t batch,
                               bool accumulate) = 0;

 protected:
  ~StoresActivations() = default;
};

// A built-in layer whose backward never reads its forward's output y (a
// convolution, a linear layer): the model's adapter then skips widening y for
// it (one pass over the output per backward, under bf16/fp16 on the CPU) and
// passes a null y. A marker, internal as DescribesKernels.
class IgnoresOutputInBackward {
 protected:
  ~IgnoresOutputInBackward() = default;
};

// A built-in layer one of whose inputs gets exactly the output's gradient
// (dx_k = dy: a residual add's unscaled input), so that the model can let
// that input's gradient buffer be the output's, where the input has no other
// consumer, and skip the copy (on a GPU one read and one write of the tensor
// per residual block). The layer is then called with a null dx for it.
// Internal, as DescribesKernels.
class PassesGradientThrough {
 public:
  virtual std::size_t gradient_passthrough_input() const = 0;

 protected:
  ~PassesGradientThrough() = default;
};

// A built-in layer whose [rows, width] output may be stored with rows wider
// than its width (the tied LM head: its vocabulary padded so that every
// 16-bit row is 16-byte aligned, as llm.c keeps its logits). The model pads
// the last node's output and its gradient (the logits, whose readers are the
// loss and Model::copy_logits, which honour the stride) and tells the layer
// the stride its stored forms' y and dy then have; its fp32 forms keep
// unpadded rows (the adapter narrows into and widens from the padded ones).
// Internal, as DescribesKernels.
class PadsOutputRows {
 public:
  // The row stride it asks for where the model stores `storage` (its width:
  // none).
  virtual std::size_t padded_row_stride(DType storage) const = 0;
  virtual void set_output_row_stride(std::size_t stride) = 0;

 protected:
  ~PadsOutputRows() = default;
};

// Builds the layer `spec` for its per-sample input shapes (one for most
// layers; add and concat take several); the Error names the layer and the
// shapes when they do not fit. `index` is the node's position (dropout mixes it
// into its mask key); `dropout` must outlive the layer. `layout` is the order
// of [C, H, W] activations (a layer type that cannot take nhwc is an Error).
std::unique_ptr<Layer> make_layer(const LayerSpec& spec, const std::vector<Shape>& inputs,
                                  const std::string& name, std::size_t index,
                                  const ComputeContext& ctx, std::size_t max_batch,
                                  const DropoutContext& dropout, Layout layout = Layout::nchw);
// The one-input form.
inline std::unique_ptr<Layer> make_layer(const LayerSpec& spec, const Shape& input,
                                         const std::string& name, std::size_t index,
                                         const ComputeContext& ctx, std::size_t max_batch,
                                         const DropoutContext& dropout,
                                         Layout layout = Layout::nchw) {
  return make_layer(spec, std::vector<Shape>{input}, name, index, ctx, max_batch, dropout, layout);
}

}  // namespace ringtrain
