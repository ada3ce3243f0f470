// A model built from a ModelSpec: its layers, all parameters in one flat f32
// buffer and all gradients in another (each layer's tensors are views into
// them, in a fixed, recorded order), activations and workspaces planned once
// for a maximum batch, and the fused softmax cross-entropy loss.
//
// The layers are the graph's nodes in spec order (topological: a node reads
// earlier nodes only); the flat buffers hold node 0's parameters first.
// Gradient buckets are therefore slices of the gradient buffer, and backward
// (in reverse node order) finishes them from the end of the buffer towards
// the start. Non-trainable state (BatchNorm's running statistics) lives in a
// third flat buffer, never given gradients.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "ringtrain/core/buffer_view.h"
#include "ringtrain/core/device.h"
#include "ringtrain/model/model_spec.h"
#include "ringtrain/ops/math_mode.h"
#include "ringtrain/ops/precision.h"
#include "ringtrain/ops/softmax_cross_entropy.h"
#include "ringtrain/tensor/layout.h"

namespace ringtrain {

struct ParamInfo {
  std::string name;                   // "conv1.weight", "fc2.bias"
  std::size_t offset = 0, count = 0;  // elements, in the flat buffers
  std::vector<std::size_t> shape;
  std::size_t layer = 0;  // index into the model's layers
};

struct ModelOptions {
  Device device{};
  std::uint64_t seed = 0;       // parameter initialisation and dropout masks
  std::size_t max_batch = 256;  // activations and workspaces are sized for it
  // TF32 for convolutions and GEMMs on a GPU (ops/math_mode.h): by default
  // PyTorch's (conv yes, GEMM no). Ignored on the CPU.
  Tf32Mode tf32 = Tf32Mode::pytorch_default;
  // The training loss's label smoothing in [0, 1) (PyTorch's label_smoothing):
  // forward_accumulate and backward use it; forward (evaluation) reports the
  // plain cross-entropy.
  float label_smoothing = 0.0f;
  // fp32, or bf16/fp16 storage of the matmul weights, activations and
  // activation gradients (ringtrain/ops/precision.h). The master weights in
  // params() stay fp32.
  DType precision = DType::f32;
  // The memory order of [C, H, W] activations (--layout). automatic: NHWC
  // for a convolutional model on a GPU in bf16/fp16 or with TF32 convolutions
  // (cuDNN's tensor-core kernels read channels-last), NCHW otherwise. Parameters, the input batch
  // (NCHW as stored; the model transposes it once, on its device) and the
  // outputs are the same in either.
  LayoutChoice layout = LayoutChoice::automatic;
  // Fused BatchNorm + ReLU and BatchNorm + add + ReLU where the intermediate
  // has one reader (--fuse): the same bits as the unfused plan, which off
  // keeps as the reference.
  bool fuse = true;
  // Linear (with its bias) -> gelu_tanh as one GEMM with cuBLASLt's GELU
  // epilogue (GPT-2's MLP), under fuse. It takes gelu of the fp32
  // pre-activation where the unfused pair rounds it first, so under bf16/fp16
  // it is NOT the unfused plan's bits: automatic plans it on a GPU under
  // bf16/fp16 only (where it saves a pass), so the CPU's default plan keeps
  // --fuse off's bits; on plans it wherever fuse is (on the CPU, the twin of
  // the epilogue's arithmetic, which tests reach through this); off never.
  enum class LinearGelu { automatic, on, off };
  LinearGelu fuse_linear_gelu = LinearGelu::automatic;
};

// What --layout resolves to for `spec` (as Model::build expands a preset)
// with per-sample input `input_shape`: the choice itself, or auto's rule
// (ModelOptions::layout); nchw without [C, H, W] input.
Layout resolve_model_layout(const ModelOptions& options, const ModelSpec& spec,
                            const std::vector<std::size_t>& input_shape);

class Layer;
class ComputeContext;
class IntervalTimer;
class BatchStatReducer;
class Tensor;

class Model {
 public:
  // input_shape is per sample: {C, H, W} or {F}. The last layer must produce
  // num_classes outputs. Errors name the layer and the shapes that do not fit.
  static std::unique_ptr<Model> build(const ModelSpec& spec,
                                      const std::vector<std::size_t>& input_shape, int num_classes,
                                      const ModelOptions& options);
  ~Model();
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;

  const ModelSpec& spec() const { return spec_; }
  Device device() const { return options_.device; }
  std::size_t max_batch() const { return options_.max_batch; }
  std::size_t num_classes() const { return num_classes_; }
  const std::vector<std::size_t>& input_shape() const { return input_shape_; }
  // The order the model keeps [C, H, W] activations in (nchw when it has none).
  Layout layout() const { return layout_; }

  std::size_t param_count() const { return param_count_; }
  BufferView params();  // flat f32, on the model's device
  BufferView grads();
  const std::vector<ParamInfo>& param_info() const { return param_info_; }
  // Non-trainable state (running statistics): flat f32 on the model's device.
  std::size_t buffer_count() const { return buffer_count_; }
  BufferView buffers();
  const std::vector<ParamInfo>& buffer_info() const { return buffer_info_; }
  // The names of the nodes a node reads ("input": the model's input).
  std::vector<std::string> node_inputs(std::size_t layer) const;
  std::size_t layer_count() const;
  std::string layer_name(std::size_t layer) const;  // "conv1", "relu2", ...
  std::string layer_kind(std::size_t layer) const;  // "conv2d", "relu", a registered type's name
  // Which kernels run the node, as one line (a convolution: the cuDNN
  // algorithms chosen so far, or the CPU path); empty where the layer says nothing.
  std::string layer_kernels(std::size_t layer) const;
  // The gelu_tanh nodes whose linear input --fuse on can run with them as one
  // cuBLASLt GEMM with the GELU epilogue (ModelOptions::fuse_linear_gelu),
  // and whether this plan does: `model show` names them for a GPU's plan
  // while it builds the CPU's, which keeps them apart.
  struct LinearGeluPairs {
    std::vector<std::string> gelu_nodes;
    bool fused = false;
  };
  LinearGeluPairs linear_gelu_pairs() const;
  std::vector<std::size_t> layer_output_shape(std::size_t layer) const;  // per sample
  // What the node's output buffer holds: the storage dtype of --precision
  // (f32, bf16, f16), the logits included.
  DType layer_output_dtype(std::size_t layer) const;
  // [offset, offset + count) of the layer's parameters in the flat buffers;
  // empty (offset, offset) for a layer without parameters.
  std::pair<std::size_t, std::size_t> layer_param_range(std::size_t layer) const;
  // A human-readable table: layer, output shape, parameters.
  std::string summary() const;
  // Bytes of activations and activation gradients the model holds per sample
  // of max_batch: each node's output, the gradient buffers (planned by
  // liveness), the input's narrowed or transposed copy. They grow with depth.
  std::size_t activation_bytes_per_sample() const { return activation_bytes_per_sample_; }
  // Bytes per sample of the scratch the layers share, sized for the largest
  // layer: a contribution before it is summed, and under bf16/fp16 the fp32
  // copies that a layer taking only fp32 reads and writes (the adapter) and a
  // GPU convolution's widened operands.
  std::size_t workspace_bytes_per_sample() const { return workspace_bytes_per_sample_; }

  // Re-points the gradients at external memory (e.g. a communicator's shared
  // window): f32, param_count elements, on the model's device. The model's own
  // gradient buffer is released. The contents are not copied.
  void bind_gradient_buffer(BufferView grads);
  // BatchNorm's batch statistics summed over the ranks by `reducer` (--sync-bn),
  // or this rank's (null, the default). The reducer must outlive the model's use.
  void set_batch_stat_reducer(BatchStatReducer* reducer);
  // Dropout masks are a pure function of (seed, rank, step, layer, element).
  // Set it before a forward and keep it until the matching backward, which
  // recomputes the same masks.
  void set_dropout_context(std::uint64_t rank, std::uint64_t step);
  // Whether a training forward draws dropout masks (a dropout layer or
  // attention dropout with a rate above 0): its kernels' keys then change
  // with every step, which a captured CUDA graph would repeat.
  bool draws_dropout_masks() const;
  // An added layer type (a plugin's, a program's) this model uses that does
  // not declare LayerType::cuda_graph, as "'name' from origin"; "" if none.
  std::string layer_type_unsafe_in_cuda_graph() const;
  // The training loss's mixed target (--augment mixup / cutmix): the second
  // label of each row (on the model's device) and the weight lam of the
  // first. forward_accumulate and backward use it, forward (evaluation)
  // never does. Set it before a forward and keep the labels unchanged until
  // the matching backward; a default LabelMix is the plain loss.
  void set_label_mix(const LabelMix& mix) { label_mix_ = mix; }

  // A model whose last node gives [T, classes] per sample (a language model)
  // has T labels per sample, one per row, and its loss is per row (token).
  std::size_t rows_per_sample() const { return rows_per_sample_; }

  struct LossResult {
    double loss_sum = 0;      // sum over the batch's rows of their losses
    std::size_t correct = 0;  // rows whose argmax is the label
    // Rows counted (labels not kIgnoreLabel); forward() only (the running
    // totals do not count).
    std::size_t counted = 0;
  };
  // x: batch x input_shape float32 and labels int32 (batch x rows_per_sample()), both on the
  // model's device. x must stay valid and unchanged until the matching backward. Returns the loss
  // at once: on a GPU that reads it back (a counted host sync). For evaluation, tools and tests.
  LossResult forward(const float* x, const std::int32_t* labels, std::size_t batch, bool training);
  // The training step's forward: the loss is added to running totals on the
  // model's device, and the host does not wait. take_loss_totals() reads and
  // resets them (one counted host sync), at logging points.
  void forward_accumulate(const float* x, const std::int32_t* labels, std::size_t batch,
                          bool training);
  // forward_accumulate and the loss's backward in one pass over the logits
  // (the fused classifier), for a training step whose backward grad_scale is
  // known at its forward: the logits' gradient is written at once, over the
  // logits where the plan keeps it in place (logits() then holds the
  // gradient). The next backward must take the same grad_scale and starts
  // below the loss. The same bits as forward_accumulate then backward.
  void forward_accumulate_fused_loss(const float* x, const std::int32_t* labels, std::size_t batch,
                                     float grad_scale);
  LossResult take_loss_totals();
  // The running totals themselves (f64 on the model's device: loss sum,
  // correct count, bad-label count), for the --nonfinite guard, which checks
  // the step's loss there and rolls a skipped step's loss back.
  BufferView loss_totals_view() const;
  // Gradient of (grad_scale * mean loss) of the last forward. accumulate=false
  // overwrites the gradients, true adds to them (gradient accumulation).
  // on_layer_ready(layer) fires as soon as every gradient of that layer is
  // final, in reverse layer order, once per layer (layers without parameters
  // included). On a GPU "final" means queued on compute_stream(): record an
  // event there before another stream reads the gradients.
  void backward(float grad_scale, bool accumulate,
                const std::function<void(std::size_t layer)>& on_layer_ready = {});
  // The logits of the last forward, in the storage dtype of --precision, on
  // the model's device: batch x rows per sample rows, each of num_classes()
  // values, logits_row_stride() apart. The stride is num_classes() but for a
  // language model's tied head under bf16/fp16, whose rows are padded to a
  // multiple of 64 (GPT-2: 50,304), as its GEMMs write them; the padding is
  // no logit (copy_logits skips it).
  BufferView logits() const;
  std::size_t logits_row_stride() const;
  // `count` of them from `first` on, indexed without the padding (row r's
  // class c at r * num_classes() + c), widened to fp32 into host memory
  // (exact).
  void copy_logits(std::size_t first, float* host, std::size_t count) const;
  void zero_grads();

  // Per-node timing (bench step --layers): while a timer is set (null: off,
  // the default), forward_accumulate/forward and backward mark on it, in the
  // model's stream order, the intervals that ProfileSlots numbers. A node's
  // forward includes the rounding of its output to --precision, its backward
  // the rounding of its output gradient and the summing of a second
  // contribution into an input's gradient. The timer must have count() slots
  // and run on compute_stream(); the model never reads it.
  struct ProfileSlots {
    std::size_t layers = 0;
    static std::size_t forward(std::size_t layer) { return 2 * layer; }
    static std::size_t backward(std::size_t layer) { return 2 * layer + 1; }
    // The work of forward before the first node: the input's transpose to
    // channels-last, the 16-bit casts of the weights and the input.
    std::size_t prepare() const { return 2 * layers; }
    std::size_t loss_forward() const { return 2 * layers + 1; }
    std::size_t loss_backward() const { return 2 * layers + 2; }
    std::size_t count() const { return 2 * layers + 3; }
  };
  ProfileSlots profile_slots() const { return {layer_count()}; }
  void set_interval_timer(IntervalTimer* timer);

  // cudaStream_t as void* on a GPU (nullptr on the CPU); all model work is
  // queued there, in order.
  void* compute_stream() const;
  // Waits until all queued model work is done (no-op on the CPU).
  void synchronize() const;

 private:
  Model();
  // Binds every layer to its range of the parameters and `grads` (a tied
  // layer to its owner's).
  void bind_layers(float* grads);
  BufferView run_layers(const float* x, const std::int32_t* labels, std::size_t batch,
                        bool training);
  // What a layer whose parameters `owner` holds is bound to: the master
  // weights, or under bf16/fp16 their copy on the 16-bit grid for a layer
  // with matmul weights.
  float* layer_params(const Layer& owner);
  struct State;
  ModelSpec spec_;
  ModelOptions options_;
  std::vector<std::size_t> input_shape_;
  Layout layout_ = Layout::nchw;
  std::size_t num_classes_ = 0, rows_per_sample_ = 1;
  std::size_t param_count_ = 0, buffer_count_ = 0, activation_bytes_per_sample_ = 0,
              workspace_bytes_per_sample_ = 0;
  std::vector<ParamInfo> param_info_, buffer_info_;
  std::unique_ptr<State> state_;
  LabelMix label_mix_;
};

}  // namespace ringtrain
