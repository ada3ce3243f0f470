// Model: layers over flat parameter and gradient buffers, with every buffer of
// the step (activations, gradient ping-pong, labels, loss workspaces) allocated
// once here, for max_batch.
#include "ringtrain/model/model.h"

#include "ringtrain/ops/precision.h"

#include "ringtrain/model/presets.h"

#include <algorithm>
#include <map>
#include <optional>

#include <fmt/format.h>

#include "kernels/softmax_cross_entropy.cuh"
#include "kernels/storage.cuh"
#include "model/batch_norm_layer.h"
#include "model/buffer_lifetimes.h"
#include "model/causal_self_attention_layer.h"
#include "model/conv2d_layer.h"
#include "model/fused_batch_norm_relu.h"
#include "model/fused_conv_relu.h"
#include "model/fused_linear_dgelu.h"
#include "model/fused_linear_gelu.h"
#include "model/fused_residual_layer_norm.h"
#include "model/kaiming_init.h"
#include "model/layer.h"
#include "model/layer_norm_layer.h"
#include "model/linear_layer.h"
#include "model/merge_layers.h"
#include "model/stateless_layers.h"
#include "ringtrain/core/buffer_copy.h"
#include "ringtrain/core/check.h"
#include "ringtrain/core/error.h"
#include "ringtrain/core/host_sync.h"
#include "ringtrain/core/interval_timer.h"
#include "ringtrain/model/layer_registry.h"
#include "ringtrain/ops/compute_context.h"
#include "ringtrain/ops/layout_transpose.h"
#include "ringtrain/ops/merge.h"
#include "ringtrain/ops/precision.h"
#include "ringtrain/ops/softmax_cross_entropy.h"
#include "ringtrain/ops/transformer_ops.h"
#include "ringtrain/tensor/device_memory.h"
#include "ringtrain/tensor/tensor.h"

namespace ringtrain {

// One node of the model's plan: its layer, the nodes it reads and the nodes
// that read it, where its parameters lie, and the buffers of its output and
// of its output's gradient. Forward and backward walk the list in order.
struct PlanNode {
  std::unique_ptr<Layer> layer;
  std::string kind;                    // its LayerKind's name or registered type
  std::vector<int> inputs;             // the nodes it reads (-1: the model input)
  std::vector<std::size_t> consumers;  // the nodes that read it, one entry per input slot
  std::pair<std::size_t, std::size_t> param_range, buffer_range;  // in the flat buffers
  std::size_t bind_from = 0;  // whose parameter range it binds (itself, or its tied owner)
  // It, or a node it reads (directly or not), has parameters: backward needs
  // its output's gradient.
  bool below_params = false;
  // The output: its own buffer (max_batch rows; in the plan's arena, or
  // allocated apart), or its input's for a view.
  Tensor activation;
  // Per input slot, where backward's contribution to that input's gradient
  // lands before it is added or narrowed (null: none goes there).
  std::vector<void*> scratch;
  // Per input slot: a later contribution to an fp32 sum waits in its scratch
  // (which lives until then) for the sum's one reader, whose backward adds
  // the waiting terms and narrows the sum in one pass (narrow_sum).
  std::vector<bool> waits;
  BufferView output;                // of the last forward
  DType output_dtype = DType::f32;  // what the output buffer holds
  // The output's gradient: index into the plan's gradient buffers (a view
  // shares its input's), or -1 where backward needs none.
  int grad = -1;
  // An input shares this node's gradient buffer (PassesGradientThrough).
  bool passes_through = false;
  // The layer reads and writes the storage dtype itself (StoresActivations);
  // null: the model widens its inputs to fp32 and narrows its output.
  StoresActivations* stores = nullptr;
  // It runs through the adapter: its layer takes only fp32, or an edge of it
  // is not in the storage dtype (the logits, token ids). Set at build.
  bool adapted = false;
  // Its backward reads y (so the adapter widens it); not IgnoresOutputInBackward.
  bool backward_reads_output = true;
  // The side interfaces the layer implements, found once at build.
  const DescribesKernels* describes = nullptr;
  const PassesGradientThrough* passes = nullptr;
  // Fusion (a rewrite of the plan, fuse_batch_norm_relu, fuse_conv_relu): on
  // a relu node the fused BatchNorm (+ add) + ReLU or conv + bias + ReLU that
  // runs in its place (its `stores`), with `inputs` rewritten and the graph's
  // as written kept for node_inputs; a BatchNorm, add or conv node whose work
  // it runs is folded: it runs nothing and has no activation or gradient
  // buffer, but keeps its name and parameters.
  std::unique_ptr<FusedNode> fused;
  std::vector<int> written_inputs;
  bool folded = false;
  std::string folded_into;
  // Fused residual add + LayerNorm (fuse_residual_layer_norm): on a
  // layer_norm node, what runs in its place, reading the add's inputs and
  // writing the add's output too (node `sum_of`). That add is folded but
  // keeps its buffers (`keeps_buffers`): later nodes read the sum, and its
  // gradient sums their contributions for the fused node's backward.
  std::unique_ptr<FusedResidualLayerNorm> fused_ln;
  int sum_of = -1;
  bool keeps_buffers = false;
  // Rows of the output wider in its buffer than in its shape (PadsOutputRows:
  // the tied head's padded logits, the last node under bf16/fp16): the
  // row's width (the shape's last dimension) and its stride; 0 and 0 where
  // unpadded. The output's gradient has the same rows.
  std::size_t row_width = 0, row_stride = 0;
  bool padded() const { return row_stride > row_width; }
  // Per sample, the elements its output buffer (and its gradient's) holds.
  std::size_t stored_elements() const {
    const std::size_t n = layer->output_shape().numel();
    return padded() ? n / row_width * row_stride : n;
  }
  // Fused linear + gelu_tanh (fuse_linear_gelu): on a gelu_tanh node, its
  // forward, which reads the linear's input and writes the linear node's
  // output (node `pre_of`: the pre-activation gelu's backward reads) besides
  // its own. That linear node's forward is skipped (`forward_by`, this
  // node); it keeps its buffers and its backward, as the gelu keeps its own.
  std::unique_ptr<FusedLinearGelu> fused_gelu;
  int pre_of = -1;
  int forward_by = -1;
  // Its backward half (fuse_linear_dgelu): on the linear node that is such a
  // gelu's one reader, its dx GEMM that also runs the gelu's backward and
  // writes the gradient of node `pre_of`'s output and its bias gradient
  // (model/fused_linear_dgelu.h); `dgelu_of` is the gelu node, whose
  // `backward_by` is this node: its backward is skipped where the GEMM ran.
  std::unique_ptr<FusedLinearDgelu> fused_dgelu;
  int dgelu_of = -1;
  int backward_by = -1;
};

// A buffer of activation gradients. Buffers whose lives do not overlap share
// memory (a slot), planned once at build. It holds the storage dtype, or fp32
// where several contributions are summed (a node read by several nodes, the
// loss's gradient): summed in fp32 and rounded once, when read; two
// contributions both on the grid are summed in the storage dtype (paired).
struct GradientBuffer {
  void* data = nullptr;
  DType dtype = DType::f32;
  std::size_t elements = 0;  // per sample
  // This backward has put the first contribution there.
  bool written = false;
  // Two contributions, each on the storage grid, summed into this buffer of
  // the storage dtype: the first written in place, the second added to it
  // and rounded in one pass (sum_two_stored), where an fp32 sum would take
  // a widened copy, an add and a narrowing pass (the same numbers).
  bool paired = false;
  // Paired, and its second term waits for the fused BatchNorm + (add +)
  // ReLU that reads the gradient, whose backward sums the two as it reads
  // them (no pass writes the sum).
  bool read_as_two = false;
  BufferView view(std::size_t batch, Device device) const {
    return {data, batch * elements, dtype, device};
  }
};

struct Model::State {
  std::unique_ptr<ComputeContext> ctx;
  DropoutContext dropout;
  std::vector<PlanNode> nodes;  // the graph, in topological order
  Tensor params, grads_owned, buffers;
  // --precision bf16|fp16: what the matmul layers read instead of the master
  // weights: the master weights rounded to the 16-bit grid, in one pass over
  // the whole buffer at each forward. The other layers (norms, embeddings)
  // are bound to the master weights themselves, which is what a copy held;
  // their ranges here are rounded too and read by nothing (a few thousand
  // values: one launch where one per run of a policy took up to 189).
  Tensor compute_params;
  // The storage dtype of activations and their gradients (--precision).
  DType storage = DType::f32;
  // --precision bf16|fp16: the input batch narrowed to the storage dtype
  // (not when the input is token ids, which stay fp32).
  Tensor stored_input;
  bool narrow_input = false;
  BufferView input;  // what the first nodes read, of the last forward
  // --layout nhwc: the input batch, transposed to channels-last on the device.
  Tensor nhwc_input;
  BufferView grads;
  std::vector<GradientBuffer> grad_buffers;
  // The activations, their gradients and the backward's scratch, placed by
  // their lives on the step's timeline (model/buffer_lifetimes.h).
  Tensor arena;
  // backward() overwrites activations that are dead by then: a second one
  // needs a new forward.
  bool activations_live = false;
  // RINGTRAIN_BUFFER_REUSE=poison: per time on the step's timeline, the
  // blocks whose life ends there, filled with 0xFF bytes (NaN in every float
  // dtype) once it has passed, so that a read after a block's death shows
  // in the results whatever shares its bytes. Empty otherwise.
  std::vector<std::vector<std::pair<void*, std::size_t>>> dies_at;  // (block, bytes)
  void poison(std::size_t time) const {
    if (time < dies_at.size())
      for (const auto& [at, bytes] : dies_at[time]) fill_bytes(*ctx, at, bytes, 0xFF);
  }
  // The adapter around a layer that takes only fp32 (under bf16/fp16): its
  // inputs widened (one per input slot), its output (or, in backward, its
  // output widened), and its output gradient widened; fp32, sized for the
  // largest such layer. Also where a stored layer reads a summed fp32
  // gradient narrowed (wide_grad).
  std::vector<Tensor> widened;
  Tensor wide_output, wide_grad;
  // Reused by every forward and backward, so that the step allocates nothing.
  std::vector<const float*> xs;
  std::vector<float*> dxs;
  std::vector<BufferView> x_views, dx_views;
  struct Contribution {
    std::size_t slot;
    int grad;    // buffer
    bool waits;  // PlanNode::waits
  };
  std::vector<Contribution> to_add;                    // a later contribution to a sum
  std::vector<std::pair<std::size_t, int>> to_narrow;  // (input slot, grad buffer)
  // Per gradient buffer, the contributions waiting to be added (PlanNode::waits),
  // in the order they were made.
  std::vector<std::vector<BufferView>> waiting;
  Tensor labels;                 // copy of the last forward's labels
  Tensor row_loss, row_correct;  // GPU loss workspaces
  Tensor loss_totals;            // running [loss sum, correct, bad labels], f64
  std::size_t last_batch = 0;
  bool forward_done = false;
  // The last forward wrote the logits' gradient too, for this grad_scale
  // (forward_accumulate_fused_loss): backward starts below the loss.
  bool loss_gradient_done = false;
  float loss_gradient_scale = 0.0f;
  IntervalTimer* timer = nullptr;  // bench step --layers; null: no marks
  // The gelu nodes fuse_linear_gelu may fuse with their linear (under
  // --fuse on, whether this plan does or not), for linear_gelu_pairs.
  std::vector<std::string> linear_gelu_candidates;

  GradientBuffer& grad_of(std::size_t node) {
    return grad_buffers[static_cast<std::size_t>(nodes[node].grad)];
  }
  // What node j's readers see: its output, or the model's input (j < 0).
  const BufferView& read(int j) const {
    return j < 0 ? input : nodes[static_cast<std::size_t>(j)].output;
  }
};

namespace {
// Whether the node's layer writes its dx for input k itself and on the
// storage grid (StoresActivations::writes_dx_on_grid): its contribution to a
// summed gradient is then taken in the storage dtype.
bool writes_dx_on_grid(const PlanNode& node, std::size_t k) {
  return !node.adapted && node.stores != nullptr && node.stores->writes_dx_on_grid(k);
}

// Whether node i's gradient is paired (GradientBuffer::paired): 16-bit
// storage, and exactly two readers, distinct, each reading it once and
// writing its dx for it on the grid in its own backward (not a view, which
// shares the buffer; not a fused node that sums into it itself). A ResNet's
// block inputs on a GPU: a convolution and the fused BatchNorm + add + ReLU's
// residual, or two convolutions.
bool sums_two_on_grid(const std::vector<PlanNode>& nodes, std::size_t i, DType storage) {
  const PlanNode& node = nodes[i];
  if (storage == DType::f32 || node.folded || node.layer->is_view() || node.consumers.size() != 2 ||
      node.consumers[0] == node.consumers[1])
    return false;
  for (const std::size_t c : node.consumers) {
    const PlanNode& reader = nodes[c];
    if (reader.folded || reader.layer->is_view() || reader.fused_ln != nullptr ||
        reader.fused_dgelu != nullptr || reader.fused_gelu != nullptr)
      return false;
    const auto at = std::find(reader.inputs.begin(), reader.inputs.end(), static_cast<int>(i));
    if (at == reader.inputs.end() ||
        std::count(reader.inputs.begin(), reader.inputs.end(), static_cast<int>(i)) != 1 ||
        !writes_dx_on_grid(reader, static_cast<std::size_t>(at - reader.inputs.begin())))
      return false;
  }
  return true;
}

// Whether the sum of a fused residual add + LayerNorm (node i: the folded
// add, which keeps its buffers) keeps a 16-bit gradient, where its readers
// are its own fused node and one later fused residual LayerNorm that reads
// it as an input once: that reader's backward writes the gradient first, on
// the grid (its g is rounded to the storage dtype, and dx0 = g, or
// dx1 = scale g with a scale of 1), and the fused node's backward reads it
// widened, the value an fp32 buffer held: the same bits in half the bytes,
// written and read (GPT-2's residual stream, two LayerNorms a block).
bool sum_gradient_on_grid(const std::vector<PlanNode>& nodes, std::size_t i, DType storage) {
  const PlanNode& node = nodes[i];
  if (storage == DType::f32 || !node.folded || !node.keeps_buffers || node.consumers.size() != 2 ||
      node.consumers[0] == node.consumers[1])
    return false;
  std::size_t own = nodes.size();  // the fused node that runs this add
  for (const std::size_t c : node.consumers)
    if (nodes[c].fused_ln != nullptr && nodes[c].sum_of == static_cast<int>(i)) own = c;
  if (own == nodes.size()) return false;
  for (const std::size_t c : node.consumers) {
    if (c == own) continue;
    const PlanNode& reader = nodes[c];
    if (reader.fused_ln == nullptr || c < own ||
        std::count(reader.inputs.begin(), reader.inputs.end(), static_cast<int>(i)) != 1)
      return false;
    const auto at = std::find(reader.inputs.begin(), reader.inputs.end(), static_cast<int>(i));
    const auto* add =
        dynamic_cast<const AddLayer*>(nodes[static_cast<std::size_t>(reader.sum_of)].layer.get());
    if (at != reader.inputs.begin() && (add == nullptr || add->scale() != 1.0f)) return false;
  }
  return true;
}

// The start and the end of an interval of the model's work on its timer
// (bench step --layers), when one is set. An interval that an exception
// leaves unfinished is never stopped, and the timer reads it as 0.
void mark_start(IntervalTimer* timer, std::size_t slot) {
  if (timer != nullptr) timer->start(slot);
}
void mark_stop(IntervalTimer* timer, std::size_t slot) {
  if (timer != nullptr) timer->stop(slot);
}
}  // namespace

Model::Model() : state_(std::make_unique<State>()) {}
Model::~Model() = default;

// --layout auto: channels-last where it pays, i.e. where cuDNN's convolutions
// run on tensor cores: 16-bit data, or fp32 with TF32 (on an H200 resnet50's
// TF32 step ran at 2346 images/s NHWC against 1894 NCHW, docs/gpu.md round 4);
// not fp32 without TF32 (not measured), and nowhere on the CPU (oneDNN
// reorders either layout into its own blocked one). Without [C, H, W] input there is nothing
// to lay out. (A type that is not registered fails the build later, with its
// own message.)
Layout resolve_model_layout(const ModelOptions& options, const ModelSpec& spec,
                            const std::vector<std::size_t>& input_shape) {
  if (input_shape.size() != 3) return Layout::nchw;
  switch (options.layout) {
    case LayoutChoice::nchw:
      return Layout::nchw;
    case LayoutChoice::nhwc:
      return Layout::nhwc;
    case LayoutChoice::automatic:
      break;
  }
  const bool convolutional =
      std::any_of(spec.layers.begin(), spec.layers.end(),
                  [](const LayerSpec& l) { return l.kind == LayerKind::conv2d; });
  // A type that cannot take NHWC (a plugin's, layer_norm) keeps auto on NCHW:
  // auto never picks what the build would then refuse.
  const bool all_channels_last =
      std::all_of(spec.layers.begin(), spec.layers.end(), [](const LayerSpec& l) {
        const LayerRegistry& r = LayerRegistry::global();
        const LayerType* t = l.kind == LayerKind::custom ? r.find(l.type) : r.find(l.kind);
        return t != nullptr && t->channels_last;
      });
  const bool tensor_core_convolutions =
      options.precision != DType::f32 || tf32_for_convolutions(options.tf32);
  return options.device.is_cuda() && tensor_core_convolutions && convolutional && all_channels_last
             ? Layout::nhwc
             : Layout::nchw;
}

namespace {

std::string layer_base_name(LayerKind kind) {
  switch (kind) {
    case LayerKind::linear:
      return "fc";
    case LayerKind::conv2d:
      return "conv";
    case LayerKind::max_pool2d:
      return "pool";
    default:
      return std::string(layer_kind_name(kind));
  }
}
}  // namespace

namespace {

// The node that `j`'s readers actually read: through views to a buffer's owner
// (-1: the model's input).
int owner_of(const std::vector<PlanNode>& nodes, int j) {
  while (j >= 0 && nodes[static_cast<std::size_t>(j)].layer->is_view())
    j = nodes[static_cast<std::size_t>(j)].inputs[0];
  return j;
}

// Whether node `reader`'s gradient contribution to node `j` can move to
// node r's backward without reordering a sum: no other reader of j lies
// between them (a summed gradient adds its contributions in backward's
// order, and three fp32 terms in another order round differently).
bool gradient_may_move(const std::vector<PlanNode>& nodes, int j, std::size_t reader,
                       std::size_t r) {
  for (std::size_t c : nodes[static_cast<std::size_t>(j)].consumers)
    if (c != reader && c > reader && c < r) return false;
  return true;
}
// Node `from` is read by new_reader where it was read by old_reader.
void rewire_reader(std::vector<PlanNode>& nodes, int from, std::size_t old_reader,
                   std::size_t new_reader) {
  for (std::size_t& c : nodes[static_cast<std::size_t>(from)].consumers)
    if (c == old_reader) c = new_reader;
}

// The plan's rewrite for fusion: every relu whose input is a BatchNorm, or an
// unscaled two-input add one of whose inputs is a BatchNorm, where each
// intermediate has that one reader, runs them as one node
// (model/fused_batch_norm_relu.h). A chain that reads the model's input
// directly is left alone (its dtype may not be the storage one), and so is
// one whose fusion would reorder the sum of a gradient (may_move; an add of
// BatchNorm's own input). Consumers are rewritten so that the gradient plan
// (which buffers sum, which pass through) sees the fused graph.
void fuse_batch_norm_relu(std::vector<PlanNode>& nodes, const ModelSpec& spec) {
  const auto node_at = [&](int j) -> PlanNode& { return nodes[static_cast<std::size_t>(j)]; };
  // Node j's BatchNorm layer, if it can be folded into its one reader.
  const auto foldable_bn = [&](int j) -> BatchNormLayer* {
    if (j < 0 || spec.layers[static_cast<std::size_t>(j)].kind != LayerKind::batch_norm)
      return nullptr;
    PlanNode& bn = node_at(j);
    if (bn.folded || bn.consumers.size() != 1 || bn.stores == nullptr ||
        owner_of(nodes, bn.inputs[0]) < 0)
      return nullptr;
    return dynamic_cast<BatchNormLayer*>(bn.layer.get());
  };
  const auto may_move = [&](int j, std::size_t reader, std::size_t r) {
    return gradient_may_move(nodes, j, reader, r);
  };
  const auto rewire = [&](int from, std::size_t old_reader, std::size_t new_reader) {
    rewire_reader(nodes, from, old_reader, new_reader);
  };
  for (std::size_t r = 0; r + 1 < nodes.size(); ++r) {
    PlanNode& relu = nodes[r];
    if (spec.layers[r].kind != LayerKind::relu || relu.stores == nullptr || relu.inputs.size() != 1)
      continue;
    const int p = relu.inputs[0];
    std::vector<std::string> names;
    int bn_at = -1, residual = -1, add_at = -1;
    if (BatchNormLayer* bn = foldable_bn(p); bn != nullptr) {
      bn_at = p;
    } else if (p >= 0 && spec.layers[static_cast<std::size_t>(p)].kind == LayerKind::add) {
      PlanNode& add = node_at(p);
      const auto* layer = dynamic_cast<const AddLayer*>(add.layer.get());
      if (layer == nullptr || add.inputs.size() != 2 || add.consumers.size() != 1 ||
          add.stores == nullptr || layer->scale() != 1.0f)
        continue;
      for (std::size_t k = 0; k < 2 && bn_at < 0; ++k) {
        const int other = add.inputs[1 - k];
        if (foldable_bn(add.inputs[k]) != nullptr && owner_of(nodes, other) >= 0 &&
            other != node_at(add.inputs[k]).inputs[0] &&
            may_move(other, static_cast<std::size_t>(p), r)) {
          bn_at = add.inputs[k];
          residual = other;
        }
      }
      if (bn_at < 0) continue;
      add_at = p;
    } else {
      continue;
    }
    PlanNode& bn = node_at(bn_at);
    if (!may_move(bn.inputs[0], static_cast<std::size_t>(bn_at), r)) continue;
    names.push_back(bn.layer->name());
    if (add_at >= 0) names.push_back(node_at(add_at).layer->name());
    names.push_back(relu.layer->name());
    relu.fused = std::make_unique<FusedBatchNormRelu>(
        *dynamic_cast<BatchNormLayer*>(bn.layer.get()), residual >= 0, names);
    relu.stores = relu.fused.get();
    relu.describes = relu.fused.get();
    relu.written_inputs = relu.inputs;
    relu.inputs = {bn.inputs[0]};
    rewire(bn.inputs[0], static_cast<std::size_t>(bn_at), r);
    if (residual >= 0) {
      relu.inputs.push_back(residual);
      rewire(residual, static_cast<std::size_t>(add_at), r);
    }
    for (int folded : {bn_at, add_at}) {
      if (folded < 0) continue;
      PlanNode& f = node_at(folded);
      f.folded = true;
      f.folded_into = relu.layer->name();
      f.stores = nullptr;
      f.passes = nullptr;
    }
  }
}

// The plan's rewrite for a residual add and the layer_norm that reads it
// (model/fused_residual_layer_norm.h): a layer_norm whose input is a
// two-input add, where the add's other readers all come later, so that in
// backward their contributions to the sum's gradient are in before
// LayerNorm's (the last, as in the unfused plan) and the add's backward can
// run right after it. Left alone: an add of the model's input (its dtype
// may not be the storage one), of one node twice, one no parameter lies
// below (no gradient to sum), and one whose fusion would reorder the sum of
// an input's gradient (may_move, as for BatchNorm).
void fuse_residual_layer_norm(std::vector<PlanNode>& nodes, const ModelSpec& spec) {
  const auto node_at = [&](int j) -> PlanNode& { return nodes[static_cast<std::size_t>(j)]; };
  const auto may_move = [&](int j, std::size_t reader, std::size_t r) {
    for (std::size_t c : node_at(j).consumers)
      if (c != reader && c > reader && c < r) return false;
    return true;
  };
  for (std::size_t r = 0; r < nodes.size(); ++r) {
    PlanNode& ln = nodes[r];
    if (spec.layers[r].kind != LayerKind::layer_norm || ln.stores == nullptr ||
        ln.inputs.size() != 1 || ln.fused_ln != nullptr)
      continue;
    const int p = ln.inputs[0];
    if (p < 0 || spec.layers[static_cast<std::size_t>(p)].kind != LayerKind::add) continue;
    PlanNode& add = node_at(p);
    auto* norm = dynamic_cast<LayerNormLayer*>(ln.layer.get());
    const auto* sum = dynamic_cast<const AddLayer*>(add.layer.get());
    if (norm == nullptr || sum == nullptr || add.folded || add.stores == nullptr ||
        add.inputs.size() != 2 || !add.below_params || add.inputs[0] == add.inputs[1])
      continue;
    bool ok = true;
    for (std::size_t c : add.consumers) ok = ok && (c == r || c > r);
    for (int j : add.inputs)
      ok = ok && owner_of(nodes, j) >= 0 && may_move(j, static_cast<std::size_t>(p), r);
    if (!ok) continue;
    ln.fused_ln = std::make_unique<FusedResidualLayerNorm>(
        *norm, sum->scale(), std::vector<std::string>{add.layer->name(), ln.layer->name()});
    ln.describes = ln.fused_ln.get();
    ln.written_inputs = ln.inputs;
    ln.inputs = add.inputs;
    ln.sum_of = p;
    for (int j : add.inputs)
      for (std::size_t& c : node_at(j).consumers)
        if (c == static_cast<std::size_t>(p)) c = r;
    // The add keeps its consumers (r among them), so its gradient stays the
    // summed fp32 one of the unfused plan where it has several readers.
    add.folded = true;
    add.keeps_buffers = true;
    add.folded_into = ln.layer->name();
    add.stores = nullptr;
    add.passes = nullptr;
  }
}

// The plan's rewrite for conv + bias + ReLU: every relu whose input is a
// conv2d with a bias, read by that relu alone, runs them as one node
// (model/fused_conv_relu.h), the conv folded as fuse_batch_norm_relu folds a
// BatchNorm. A conv that reads the model's input fuses where that input is in
// the storage dtype (input_stored: it is narrowed, or fp32 is the storage),
// as the fused node reads it. The fused nodes run one at a time, so they
// share one workspace, sized for the largest; returns its floats per sample.
std::size_t fuse_conv_relu(std::vector<PlanNode>& nodes, const ModelSpec& spec,
                           const ComputeContext& ctx, std::size_t max_batch, bool input_stored) {
  std::vector<std::pair<std::size_t, int>> chains;  // (relu, conv)
  std::size_t per_sample = 0;
  for (std::size_t r = 0; r + 1 < nodes.size(); ++r) {
    PlanNode& relu = nodes[r];
    if (spec.layers[r].kind != LayerKind::relu || relu.stores == nullptr || relu.fused != nullptr ||
        relu.inputs.size() != 1)
      continue;
    const int p = relu.inputs[0];
    if (p < 0 || spec.layers[static_cast<std::size_t>(p)].kind != LayerKind::conv2d) continue;
    PlanNode& conv = nodes[static_cast<std::size_t>(p)];
    const auto* layer = dynamic_cast<const Conv2dLayer*>(conv.layer.get());
    if (layer == nullptr || !layer->has_bias() || conv.folded || conv.consumers.size() != 1 ||
        conv.inputs.size() != 1)
      continue;
    const int x = conv.inputs[0];
    if (owner_of(nodes, x) < 0 && !input_stored) continue;
    if (x >= 0 && !gradient_may_move(nodes, x, static_cast<std::size_t>(p), r)) continue;
    chains.emplace_back(r, p);
    per_sample = std::max(per_sample, layer->relu_workspace_floats());
  }
  if (chains.empty()) return 0;
  auto workspace = std::make_shared<LayerWorkspace>(ctx, per_sample, max_batch);
  for (const auto& [r, p] : chains) {
    PlanNode& relu = nodes[r];
    PlanNode& conv = nodes[static_cast<std::size_t>(p)];
    relu.fused = std::make_unique<FusedConvRelu>(
        *dynamic_cast<Conv2dLayer*>(conv.layer.get()),
        std::vector<std::string>{conv.layer->name(), relu.layer->name()}, workspace);
    relu.stores = relu.fused.get();
    relu.describes = relu.fused.get();
    relu.written_inputs = relu.inputs;
    relu.inputs = {conv.inputs[0]};
    if (conv.inputs[0] >= 0) rewire_reader(nodes, conv.inputs[0], static_cast<std::size_t>(p), r);
    conv.folded = true;
    conv.folded_into = relu.layer->name();
    conv.stores = nullptr;
    conv.passes = nullptr;
  }
  return per_sample;
}

// The (gelu, linear) pairs fuse_linear_gelu may fuse, on any device: a
// gelu_tanh whose input is a linear node read by that gelu alone.
std::vector<std::pair<std::size_t, int>> linear_gelu_candidates(const std::vector<PlanNode>& nodes,
                                                                const ModelSpec& spec,
                                                                bool input_stored) {
  std::vector<std::pair<std::size_t, int>> pairs;
  for (std::size_t r = 0; r < nodes.size(); ++r) {
    const PlanNode& gelu = nodes[r];
    if (spec.layers[r].kind != LayerKind::gelu_tanh || gelu.stores == nullptr ||
        gelu.fused != nullptr || gelu.fused_gelu != nullptr || gelu.inputs.size() != 1)
      continue;
    const int p = gelu.inputs[0];
    if (p < 0 || spec.layers[static_cast<std::size_t>(p)].kind != LayerKind::linear) continue;
    const PlanNode& lin = nodes[static_cast<std::size_t>(p)];
    if (dynamic_cast<const LinearLayer*>(lin.layer.get()) == nullptr || lin.folded ||
        lin.forward_by >= 0 || lin.consumers.size() != 1 || lin.inputs.size() != 1)
      continue;
    if (owner_of(nodes, lin.inputs[0]) < 0 && !input_stored) continue;
    pairs.emplace_back(r, p);
  }
  return pairs;
}

// The plan's rewrite for linear -> gelu_tanh (model/fused_linear_gelu.h):
// every gelu_tanh whose input is a linear node read by that gelu alone. Only
// the forward fuses, so the gradient plan is the unfused one as it is. A
// linear that reads the model's input fuses where that input is in the
// storage dtype (input_stored), as fuse_conv_relu's rule; on a GPU the
// linear must take its stored path (bf16/fp16: there is no fp32 epilogue
// here). The CPU twins run one at a time and share one workspace; returns
// its floats per sample (0 on a GPU, where cuBLASLt writes both outputs).
std::size_t fuse_linear_gelu(std::vector<PlanNode>& nodes, const ModelSpec& spec,
                             const ComputeContext& ctx, std::size_t max_batch, bool input_stored) {
  std::vector<std::pair<std::size_t, int>> pairs;  // (gelu, linear)
  std::size_t per_sample = 0;
  for (const auto& [r, p] : linear_gelu_candidates(nodes, spec, input_stored)) {
    const PlanNode& lin = nodes[static_cast<std::size_t>(p)];
    if (ctx.is_cuda() && lin.stores == nullptr) continue;
    pairs.emplace_back(r, p);
    per_sample = std::max(per_sample, FusedLinearGelu::workspace_floats(
                                          *dynamic_cast<const LinearLayer*>(lin.layer.get())));
  }
  if (pairs.empty()) return 0;
  std::shared_ptr<LayerWorkspace> workspace;
  if (!ctx.is_cuda()) workspace = std::make_shared<LayerWorkspace>(ctx, per_sample, max_batch);
  for (const auto& [r, p] : pairs) {
    PlanNode& gelu = nodes[r];
    PlanNode& lin = nodes[static_cast<std::size_t>(p)];
    gelu.fused_gelu = std::make_unique<FusedLinearGelu>(
        *dynamic_cast<LinearLayer*>(lin.layer.get()), *gelu.stores, ctx,
        std::vector<std::string>{lin.layer->name(), gelu.layer->name()}, workspace);
    gelu.describes = gelu.fused_gelu.get();
    gelu.pre_of = p;
    lin.forward_by = static_cast<int>(r);
  }
  return ctx.is_cuda() ? 0 : per_sample;
}

// The backward half of that rewrite (model/fused_linear_dgelu.h): every
// fused gelu whose output has one reader, a linear layer reading it alone,
// gets that reader's dx GEMM to run its backward (cuBLASLt's DGELU_BGRAD on
// a GPU, where both linears take the stored path; the CPU twin through the
// reader's fp32 adapter). It runs where the forward's fusion runs: the plan
// rewritten by fuse_linear_gelu, the same option.
void fuse_linear_dgelu(std::vector<PlanNode>& nodes, const ModelSpec& spec,
                       const ComputeContext& ctx) {
  for (std::size_t r = 0; r < nodes.size(); ++r) {
    PlanNode& gelu = nodes[r];
    if (gelu.fused_gelu == nullptr || gelu.pre_of < 0 || gelu.consumers.size() != 1) continue;
    const std::size_t c = gelu.consumers[0];
    PlanNode& proj = nodes[c];
    auto* proj_layer = dynamic_cast<LinearLayer*>(proj.layer.get());
    if (spec.layers[c].kind != LayerKind::linear || proj_layer == nullptr || proj.folded ||
        proj.fused_dgelu != nullptr || proj.inputs.size() != 1 ||
        proj.inputs[0] != static_cast<int>(r) || !proj.layer->tied_to().empty())
      continue;
    // The GPU's GEMM reads and writes the stored buffers; the CPU's twin
    // hooks the adapter's fp32 dx.
    if (ctx.is_cuda() ? proj.stores == nullptr : proj.stores != nullptr) continue;
    PlanNode& fc = nodes[static_cast<std::size_t>(gelu.pre_of)];
    auto* fc_layer = dynamic_cast<LinearLayer*>(fc.layer.get());
    if (fc_layer == nullptr) continue;
    proj.fused_dgelu = std::make_unique<FusedLinearDgelu>(*proj_layer, *fc_layer, ctx,
                                                          gelu.layer->name(), fc.layer->name());
    proj.describes = proj.fused_dgelu.get();
    proj.dgelu_of = static_cast<int>(r);
    gelu.backward_by = static_cast<int>(c);
    gelu.fused_gelu->set_backward_fused_into(proj.layer->name());
  }
}

// The last forward that reads node i's output, where no backward reads it:
// its own backward ignores y, and each reader (through views) is a node whose
// forward runs at its index and whose backward ignores that input (a fused
// residual + LayerNorm's reads the sum alone). Then the output's memory is
// free once that forward has run. nullopt: some backward reads it, or a
// reader that is not so plain (folded, run by another node, adapted).
std::optional<std::size_t> forward_only_until(const std::vector<PlanNode>& nodes, std::size_t i) {
  const PlanNode& node = nodes[i];
  if (node.backward_reads_output || node.layer->is_view() || node.folded || node.forward_by >= 0 ||
      i + 1 == nodes.size())
    return std::nullopt;
  for (const PlanNode& n : nodes)
    if (n.sum_of == static_cast<int>(i) || n.pre_of == static_cast<int>(i)) return std::nullopt;
  std::size_t last = i;
  std::vector<std::size_t> read_through{i};  // i, and views of it
  while (!read_through.empty()) {
    const std::size_t v = read_through.back();
    read_through.pop_back();
    for (const std::size_t c : nodes[v].consumers) {
      const PlanNode& reader = nodes[c];
      if (reader.layer->is_view()) {
        if (c + 1 == nodes.size()) return std::nullopt;  // the logits, read after the step
        read_through.push_back(c);
        continue;
      }
      if (reader.folded || reader.forward_by >= 0 || reader.adapted ||
          reader.fused_gelu != nullptr || reader.fused_dgelu != nullptr)
        return std::nullopt;
      for (std::size_t k = 0; k < reader.inputs.size(); ++k)
        if (reader.inputs[k] == static_cast<int>(v) && reader.fused_ln == nullptr &&
            (reader.stores == nullptr || reader.stores->backward_reads_input(k)))
          return std::nullopt;
      last = std::max(last, c);
    }
  }
  return last;
}

}  // namespace

std::unique_ptr<Model> Model::build(const ModelSpec& given,
                                    const std::vector<std::size_t>& input_shape, int num_classes,
                                    const ModelOptions& options) {
  // A graph preset takes its class count from the data.
  const ModelSpec spec = given.preset.empty() || num_classes <= 0
                             ? given
                             : graph_preset(given.preset, static_cast<std::size_t>(num_classes));
  RT_CHECK(!input_shape.empty() && input_shape.size() <= 3,
           "model input shape must be [features] or [channels, height, width], got {} dimensions",
           input_shape.size());
  for (std::size_t d : input_shape)
    RT_CHECK(d > 0, "model input shape [{}] has a zero dimension", fmt::join(input_shape, ", "));
  RT_CHECK(num_classes > 0, "the number of classes must be positive, got {}", num_classes);
  RT_CHECK(options.max_batch > 0, "max_batch must be at least 1");
  RT_CHECK(options.label_smoothing >= 0.0f && options.label_smoothing < 1.0f,
           "label smoothing must be in [0, 1), got {}", options.label_smoothing);
  RT_CHECK(!spec.layers.empty(), "model spec has no layers");
  Shape shape(input_shape);
  if (!spec.input_shape.empty()) {
    const bool ok = spec.input_shape.size() == 1 ? spec.input_shape[0] == shape.numel()
                                                 : Shape(spec.input_shape) == shape;
    RT_CHECK(ok, "model '{}' expects input {} but the data has samples of shape {}",
             spec.describe(), Shape(spec.input_shape).to_string(), shape.to_string());
  }

  std::unique_ptr<Model> m(new Model());
  m->spec_ = given;
  m->options_ = options;
  m->input_shape_ = input_shape;
  m->num_classes_ = static_cast<std::size_t>(num_classes);
  State& s = *m->state_;
  s.ctx = ComputeContext::create(options.device, options.tf32, options.precision);
  m->layout_ = resolve_model_layout(options, spec, input_shape);
  s.dropout.seed = options.seed;
  const std::size_t B = options.max_batch;

  // Nodes: a named node keeps its name; the others are named per kind, conv1,
  // relu1, pool1, conv2, ..., fc1, fc2 (a registered type by its own name:
  // layernorm1). A node reads the nodes it names, else the previous one.
  std::map<std::string, std::size_t> counters;
  std::map<std::string, int> by_name;  // explicit names
  std::map<std::string, std::size_t> taken;
  std::vector<std::vector<ParamDesc>> descs, buffer_descs;
  std::vector<Shape> shapes;  // output shape per node
  // " at 3:5" where the node was written (a spec parsed from text).
  const auto written_at = [&spec](std::size_t i) {
    return i < spec.origins.size() ? " at " + spec.origins[i] : std::string();
  };
  for (std::size_t i = 0; i < spec.layers.size(); ++i) {
    const LayerSpec& l = spec.layers[i];
    std::string name = l.name;
    if (name.empty()) {
      const std::string base = l.kind == LayerKind::custom ? l.type : layer_base_name(l.kind);
      name = fmt::format("{}{}", base, ++counters[base]);
    }
    RT_CHECK(taken.count(name) == 0,
             "model spec: node {} ({}) is named '{}', as node {} already is: rename one", i,
             l.to_string(), name, taken.count(name) ? taken[name] : 0);
    taken[name] = i;
    std::vector<int> in;
    if (l.inputs.empty()) {
      in.push_back(static_cast<int>(i) - 1);
    } else {
      for (const std::string& n : l.inputs) {
        if (n == "input") {
          in.push_back(-1);
          continue;
        }
        const auto it = by_name.find(n);
        RT_CHECK(it != by_name.end(),
                 "model spec: node {} ({}){} reads '{}', which is not an earlier node", i,
                 l.to_string(), written_at(i), n);
        in.push_back(it->second);
      }
    }
    std::vector<Shape> in_shapes;
    for (int j : in) {
      in_shapes.push_back(j < 0 ? Shape(input_shape) : shapes[static_cast<std::size_t>(j)]);
      if (j >= 0) s.nodes[static_cast<std::size_t>(j)].consumers.push_back(i);
    }
    LayerSpec made = l;
    if (l.kind == LayerKind::lm_head) {
      // The head's vocabulary is its tied embedding's.
      const auto it = by_name.find(l.tied);
      RT_CHECK(it != by_name.end() && spec.layers[static_cast<std::size_t>(it->second)].kind ==
                                          LayerKind::token_embedding,
               "model spec: node '{}' ({}) is tied to '{}', which is not an earlier "
               "token_embedding node",
               name, l.to_string(), l.tied);
      made.vocab = spec.layers[static_cast<std::size_t>(it->second)].vocab;
    }
    PlanNode node;
    try {
      node.layer = make_layer(made, in_shapes, name, i, *s.ctx, B, s.dropout, m->layout_);
    } catch (const Error& e) {
      RT_CHECK(false, "model spec: node '{}' ({}){}: {}", name, l.to_string(), written_at(i),
               e.what());
    }
    if (!l.name.empty()) by_name[l.name] = static_cast<int>(i);
    node.inputs = std::move(in);
    node.kind = l.kind == LayerKind::custom ? l.type : std::string(layer_kind_name(l.kind));
    node.describes = dynamic_cast<const DescribesKernels*>(node.layer.get());
    node.passes = dynamic_cast<const PassesGradientThrough*>(node.layer.get());
    node.backward_reads_output =
        dynamic_cast<const IgnoresOutputInBackward*>(node.layer.get()) == nullptr;
    node.stores = dynamic_cast<StoresActivations*>(node.layer.get());
    if (node.stores != nullptr && !node.stores->stores_activations()) node.stores = nullptr;
    shapes.push_back(node.layer->output_shape());
    descs.push_back(node.layer->param_descs());
    buffer_descs.push_back(node.layer->buffer_descs());
    s.nodes.push_back(std::move(node));
  }
  for (std::size_t i = 0; i + 1 < spec.layers.size(); ++i)
    RT_CHECK(!s.nodes[i].consumers.empty(),
             "model spec: node '{}' ({}){} is read by no later node: every node but the last "
             "must feed another",
             s.nodes[i].layer->name(), spec.layers[i].to_string(), written_at(i));
  shape = shapes.back();
  // [classes] per sample, or [T, classes]: one label per row (a language
  // model's per-token loss).
  // Named by where its last node was written (a file's line), not by the
  // whole expanded spec, which for a 30-line file is a screenful.
  const std::string last_node =
      spec.origins.size() == spec.layers.size()
          ? "'" + s.nodes.back().layer->name() + "'" + written_at(spec.layers.size() - 1)
          : "'" + s.nodes.back().layer->name() + "'";
  RT_CHECK((shape.rank() == 1 || shape.rank() == 2) && shape[shape.rank() - 1] == m->num_classes_,
           "model {} ends at node {} with outputs of shape {} but the data has {} classes: the "
           "last layer should be linear(out={})",
           spec.preset.empty() ? std::string("spec") : "preset " + spec.preset, last_node,
           shape.to_string(), num_classes, num_classes);
  m->rows_per_sample_ = shape.rank() == 2 ? shape[0] : 1;
  // The logits' rows padded where the last node asks for it (the tied head
  // under bf16/fp16): its GEMMs then write and read them in place, and the
  // loss reads the true classes of each row.
  if (auto* pads = dynamic_cast<PadsOutputRows*>(s.nodes.back().layer.get()); pads != nullptr) {
    const std::size_t stride = pads->padded_row_stride(options.precision);
    RT_CHECK(stride >= m->num_classes_, "model: node '{}' asks for rows of {} for {} classes",
             s.nodes.back().layer->name(), stride, m->num_classes_);
    pads->set_output_row_stride(stride);
    if (stride > m->num_classes_) {
      s.nodes.back().row_width = m->num_classes_;
      s.nodes.back().row_stride = stride;
    }
  }
  // Flat layout: node order, and weight before bias inside a layer.
  std::size_t offset = 0, buffer_offset = 0;
  // Places node i's tensors at `at` onwards in one flat buffer; returns [begin, end).
  const auto place = [&](std::size_t i, const std::vector<ParamDesc>& tensors, std::size_t& at,
                         std::vector<ParamInfo>& infos) {
    const std::size_t begin = at;
    for (const ParamDesc& d : tensors) {
      infos.push_back(
          {s.nodes[i].layer->name() + "." + d.name, at, d.shape.numel(), d.shape.to_vector(), i});
      at += d.shape.numel();
    }
    return std::pair<std::size_t, std::size_t>(begin, at);
  };
  for (std::size_t i = 0; i < s.nodes.size(); ++i) {
    PlanNode& node = s.nodes[i];
    node.param_range = place(i, descs[i], offset, m->param_info_);
    node.buffer_range = place(i, buffer_descs[i], buffer_offset, m->buffer_info_);
    node.below_params = node.param_range.second > node.param_range.first;
    for (int j : node.inputs)
      if (j >= 0)
        node.below_params = node.below_params || s.nodes[static_cast<std::size_t>(j)].below_params;
  }
  m->param_count_ = offset;
  // After the parameters are placed and below_params is known from the graph
  // as written: fusion changes what runs, not the model.
  std::size_t fused_workspace = 0;  // floats per sample
  if (options.fuse) {
    // The model's input is stored in the storage dtype unless a node reads
    // it as token ids (then it stays fp32), as narrow_input decides below.
    const bool input_stored =
        options.precision == DType::f32 ||
        std::none_of(s.nodes.begin(), s.nodes.end(), [](const PlanNode& node) {
          return std::find(node.inputs.begin(), node.inputs.end(), -1) != node.inputs.end() &&
                 node.layer->reads_token_ids();
        });
    fuse_batch_norm_relu(s.nodes, spec);
    fused_workspace = fuse_conv_relu(s.nodes, spec, *s.ctx, B, input_stored);
    fuse_residual_layer_norm(s.nodes, spec);
    // Not the unfused plan's bits under bf16/fp16 (model/fused_linear_gelu.h):
    // by default on a GPU under bf16/fp16 only.
    using LinearGelu = ModelOptions::LinearGelu;
    const bool linear_gelu = options.fuse_linear_gelu == LinearGelu::on ||
                             (options.fuse_linear_gelu == LinearGelu::automatic &&
                              options.device.is_cuda() && options.precision != DType::f32);
    for (const auto& pair : linear_gelu_candidates(s.nodes, spec, input_stored))
      s.linear_gelu_candidates.push_back(s.nodes[pair.first].layer->name());
    if (linear_gelu) {
      fused_workspace += fuse_linear_gelu(s.nodes, spec, *s.ctx, B, input_stored);
      fuse_linear_dgelu(s.nodes, spec, *s.ctx);
    }
  }
  const Device dev = options.device;
  s.params = Tensor::empty({offset}, DType::f32, dev);
  s.grads_owned = Tensor::zeros({offset}, DType::f32, dev);
  s.grads = s.grads_owned.buffer();

  // Seeded Kaiming init on the host, then one copy to the device.
  std::vector<float> host(offset);
  std::size_t tensor_index = 0;
  for (std::size_t i = 0; i < s.nodes.size(); ++i) {
    std::size_t at = s.nodes[i].param_range.first;
    for (const ParamDesc& d : descs[i]) {
      kaiming_normal_fill(host.data() + at, d.shape.numel(), d.fan_in, options.seed,
                          tensor_index++);
      if (d.fan_in == 0) std::fill_n(host.data() + at, d.shape.numel(), d.constant);
      at += d.shape.numel();
    }
  }
  s.params.copy_from(Tensor::borrow(host.data(), {offset}, DType::f32, Device::cpu()));
  s.storage = options.precision;
  if (options.precision != DType::f32) {
    s.narrow_input = true;
    for (const PlanNode& node : s.nodes)
      for (int j : node.inputs)
        if (j < 0 && node.layer->reads_token_ids()) s.narrow_input = false;
    s.compute_params = Tensor::empty({std::max<std::size_t>(offset, 1)}, DType::f32, dev);
    if (s.narrow_input)
      s.stored_input =
          Tensor::empty({options.max_batch * Shape(input_shape).numel()}, s.storage, dev);
  }
  // Weight tying: the tied layer reads its owner's range.
  for (std::size_t i = 0; i < s.nodes.size(); ++i) {
    PlanNode& node = s.nodes[i];
    node.bind_from = i;
    const std::string& owner = node.layer->tied_to();
    if (owner.empty()) continue;
    const auto it = by_name.find(owner);
    RT_CHECK(it != by_name.end(), "model spec: node '{}' is tied to '{}', which is not a node",
             node.layer->name(), owner);
    node.bind_from = static_cast<std::size_t>(it->second);
    s.nodes[node.bind_from].layer->set_gradient_shared();
  }
  m->bind_layers(static_cast<float*>(s.grads.ptr));

  // Non-trainable state, at its constants (running mean 0, variance 1).
  m->buffer_count_ = buffer_offset;
  std::vector<float> host_buffers(buffer_offset);
  for (std::size_t i = 0; i < s.nodes.size(); ++i) {
    std::size_t at = s.nodes[i].buffer_range.first;
    for (const ParamDesc& d : buffer_descs[i]) {
      std::fill_n(host_buffers.data() + at, d.shape.numel(), d.constant);
      at += d.shape.numel();
    }
  }
  s.buffers = Tensor::empty({std::max<std::size_t>(buffer_offset, 1)}, DType::f32, dev);
  if (buffer_offset > 0)
    copy_view(BufferView{s.buffers.data(), buffer_offset, DType::f32, dev},
              view_of(host_buffers.data(), buffer_offset));
  for (PlanNode& node : s.nodes)
    if (node.buffer_range.second > node.buffer_range.first)
      node.layer->bind_buffers(s.buffers.data_as<float>() + node.buffer_range.first);

  // Activations: one buffer per node that is not a view, in the storage
  // dtype (the logits too: the loss reads them widened). Gradients: one per
  // node whose gradient backward needs (a view shares its input's), and a
  // scratch per input slot for a contribution before it is added or narrowed.
  const std::size_t L = s.nodes.size();
  const DType input_dtype = s.narrow_input ? s.storage : DType::f32;
  std::size_t slots = 1;
  std::vector<std::size_t> grad_elements;  // per sample, per gradient buffer
  for (std::size_t i = 0; i < L; ++i) {
    PlanNode& node = s.nodes[i];
    const std::size_t n = node.stored_elements();
    slots = std::max(slots, node.inputs.size());
    const int in = node.inputs[0];
    if (node.folded && !node.keeps_buffers) {  // its work is its fused node's: no buffers
      node.output_dtype = s.storage;
      continue;
    }
    if (node.layer->is_view()) {
      node.output_dtype = in < 0 ? input_dtype : s.nodes[static_cast<std::size_t>(in)].output_dtype;
    } else {
      node.output_dtype = s.storage;
      // Apart from the arena (model/buffer_lifetimes.h), where the rest are
      // placed: padded rows, which start as zeros so that their padding holds
      // a defined value where no GEMM writes it (the CPU's adapter narrows the
      // true columns only; the loss writes the gradient's padding 0), and the
      // logits, which are read after the step.
      if (node.padded())
        node.activation = Tensor::zeros({B * n}, node.output_dtype, dev);
      else if (i + 1 == L)
        node.activation = Tensor::empty({B * n}, node.output_dtype, dev);
    }
    const bool wanted = node.below_params || i + 1 == L;
    if (!wanted) continue;
    if (node.layer->is_view() && in >= 0 && s.nodes[static_cast<std::size_t>(in)].grad >= 0) {
      node.grad = s.nodes[static_cast<std::size_t>(in)].grad;
    } else {
      node.grad = static_cast<int>(grad_elements.size());
      grad_elements.push_back(n);
    }
  }
  // A node whose only consumer passes its output gradient through to it
  // (PassesGradientThrough: a residual add's first input) shares that
  // consumer's gradient buffer: its gradient is exactly the consumer's, and
  // nothing else adds to it. Later nodes first, so a chain of them shares one.
  for (std::size_t i = L; i-- > 0;) {
    PlanNode& node = s.nodes[i];
    if (node.passes == nullptr || node.grad < 0) continue;
    const std::size_t k = node.passes->gradient_passthrough_input();
    if (k >= node.inputs.size() || node.inputs[k] < 0) continue;
    const PlanNode& input = s.nodes[static_cast<std::size_t>(node.inputs[k])];
    const int from = input.grad;
    if (from < 0 || from == node.grad || input.consumers.size() != 1 || !input.below_params ||
        input.layer->is_view() ||
        grad_elements[static_cast<std::size_t>(from)] !=
            grad_elements[static_cast<std::size_t>(node.grad)])
      continue;
    for (PlanNode& other : s.nodes)  // the input (whose only reader is i, so no view shares it)
      if (other.grad == from) other.grad = node.grad;
    node.passes_through = true;
  }
  {  // renumber the buffers still in use, in their first node's order
    std::vector<int> renumber(grad_elements.size(), -1);
    std::vector<std::size_t> elements;
    for (PlanNode& node : s.nodes) {
      if (node.grad < 0) continue;
      int& to = renumber[static_cast<std::size_t>(node.grad)];
      if (to < 0) {
        to = static_cast<int>(elements.size());
        elements.push_back(grad_elements[static_cast<std::size_t>(node.grad)]);
      }
      node.grad = to;
    }
    grad_elements = std::move(elements);
  }
  // Which nodes run through the fp32 adapter (before the gradient plan,
  // which asks which dx are on the storage grid). A layer that reads token
  // ids (fp32, never rounded) takes them as they are.
  for (PlanNode& node : s.nodes) {
    node.adapted = !node.layer->is_view() && !node.folded &&
                   (node.stores == nullptr || node.output_dtype != s.storage ||
                    std::any_of(node.inputs.begin(), node.inputs.end(), [&](int j) {
                      const DType in =
                          j < 0 ? input_dtype : s.nodes[static_cast<std::size_t>(j)].output_dtype;
                      return in != s.storage && !(j < 0 && node.layer->reads_token_ids());
                    }));
    // The rewrite reads no model input, so every edge of it is stored.
    RT_CHECK(node.fused_ln == nullptr || !node.adapted,
             "model: fused node '{}' would need the fp32 adapter", node.layer->name());
    RT_CHECK(!(node.adapted && node.fused), "model: fused node '{}' reads a {} input",
             node.layer->name(), dtype_name(input_dtype));
    RT_CHECK(node.fused_gelu == nullptr || !node.adapted,
             "model: fused node '{}' would need the fp32 adapter", node.layer->name());
    // The GPU's DGELU GEMM reads the stored buffers; the CPU twin reads the
    // adapter's fp32 dx.
    RT_CHECK(node.fused_dgelu == nullptr || node.adapted == !dev.is_cuda(),
             "model: '{}' fused with a gelu's backward {} the fp32 adapter", node.layer->name(),
             dev.is_cuda() ? "would need" : "needs");
  }
  // A gradient buffer holds the storage dtype, but fp32 where contributions
  // are summed (a node read by several nodes: the sum rounded once, as an
  // fp32 run adds), unless they are two, both on the grid (paired: summed in
  // the storage dtype, the same numbers), or a fused residual LayerNorm's sum
  // whose one other reader writes it first, on the grid (sum_gradient_on_grid).
  // The loss writes the logits'
  // gradient in the storage dtype, each value rounded once.
  std::vector<DType> grad_dtype(grad_elements.size(), s.storage);
  std::vector<bool> grad_paired(grad_elements.size(), false);
  for (std::size_t i = 0; i < L; ++i) {
    const PlanNode& node = s.nodes[i];
    if (node.grad < 0 || node.consumers.size() < 2) continue;
    const auto g = static_cast<std::size_t>(node.grad);
    if (sums_two_on_grid(s.nodes, i, s.storage))
      grad_paired[g] = true;
    else if (!sum_gradient_on_grid(s.nodes, i, s.storage))
      grad_dtype[g] = DType::f32;
  }
  // A buffer that another node sums in fp32 is no pair.
  for (std::size_t g = 0; g < grad_paired.size(); ++g)
    if (grad_dtype[g] == DType::f32) grad_paired[g] = false;
  // Each buffer's life in node indices, [lo, hi]: backward runs from the last
  // node down, so the buffer is first written by the backward of its last
  // reader (hi; the loss writes the last node's, before node L-1) and last read
  // by the backward of its earliest node (lo).
  const std::size_t G = grad_elements.size();
  std::vector<std::size_t> lo(G, L), hi(G, 0);
  for (std::size_t i = 0; i < L; ++i) {
    const PlanNode& node = s.nodes[i];
    if (node.grad < 0) continue;
    const auto g = static_cast<std::size_t>(node.grad);
    lo[g] = std::min(lo[g], i);
    hi[g] = std::max(hi[g], i + 1 == L ? L : i);
    for (int j : node.inputs)
      if (j >= 0 && s.nodes[static_cast<std::size_t>(j)].grad >= 0) {
        const auto gj = static_cast<std::size_t>(s.nodes[static_cast<std::size_t>(j)].grad);
        hi[gj] = std::max(hi[gj], i);
      }
    // A linear whose dx GEMM runs the gelu's backward (fuse_linear_dgelu)
    // writes the pre-activation's gradient itself, while it reads its dy:
    // that buffer lives from this node down, and shares no slot with dy.
    if (node.fused_dgelu != nullptr) {
      const PlanNode& gelu = s.nodes[static_cast<std::size_t>(node.dgelu_of)];
      const PlanNode& pre = s.nodes[static_cast<std::size_t>(gelu.pre_of)];
      RT_CHECK(pre.grad >= 0 && gelu.grad >= 0 && pre.grad != gelu.grad &&
                   grad_dtype[static_cast<std::size_t>(pre.grad)] == s.storage,
               "model: '{}' fused with '{}''s backward needs the pre-activation's own stored "
               "gradient",
               node.layer->name(), gelu.layer->name());
      const auto gp = static_cast<std::size_t>(pre.grad);
      hi[gp] = std::max(hi[gp], i);
    }
  }
  // The logits' gradient is written over the logits themselves, where nothing
  // reads them after the loss's backward (the last node's backward ignores
  // its output; no other node shares the buffer): the loss reads each row
  // before it writes it, and a language model's [tokens, vocabulary] block is
  // the largest of the step (GPT-2 at 16 x 1024 tokens: 1.6 GB in bf16).
  const PlanNode& last = s.nodes[L - 1];
  const std::size_t none = G;
  std::size_t in_place = none;
  if (last.grad >= 0 && !last.layer->is_view() && !last.backward_reads_output &&
      grad_dtype[static_cast<std::size_t>(last.grad)] == last.output_dtype &&
      std::count_if(s.nodes.begin(), s.nodes.end(),
                    [&](const PlanNode& n) { return n.grad == last.grad; }) == 1)
    in_place = static_cast<std::size_t>(last.grad);
  // Every transient buffer's life on the step's timeline: node i's forward at
  // i, the loss at L, node i's backward at 2L - i. An activation lives from
  // its node's forward to its node's backward: its readers are the node and
  // its consumers (later nodes, whose backward comes first), and a fused
  // node that writes it runs later than its index; one that no backward reads
  // lives to its last reader's forward (forward_only_until). A gradient buffer lives
  // from the backward that first writes it (its last reader's, hi; the loss's
  // for the logits) to the one that last reads it (lo).
  std::vector<LiveBlock> blocks;
  enum class BlockKind { activation, gradient, scratch, nhwc_input };
  struct BlockUse {
    BlockKind kind;
    std::size_t index, slot;  // node or gradient buffer; input slot (scratch)
  };
  std::vector<BlockUse> uses;
  const auto backward_at = [&](std::size_t i) { return 2 * L - i; };
  // RINGTRAIN_BUFFER_REUSE=off: every block apart (several times the
  // memory); poison: placed as usual, and each block filled with NaN once
  // its life ends (State::dies_at). Both check the lives: a model trains to
  // the same bits either way.
  const char* reuse_env = std::getenv("RINGTRAIN_BUFFER_REUSE");
  const std::string reuse_mode = reuse_env == nullptr ? "" : reuse_env;
  RT_CHECK(
      reuse_mode.empty() || reuse_mode == "on" || reuse_mode == "off" || reuse_mode == "poison",
      "RINGTRAIN_BUFFER_REUSE={}: expected on, off or poison", reuse_mode);
  const bool reuse = reuse_mode != "off";
  const auto add_block = [&](std::size_t bytes, std::size_t birth, std::size_t death,
                             BlockUse use) {
    blocks.push_back(reuse ? LiveBlock{bytes, birth, death} : LiveBlock{bytes, 0, 2 * L});
    uses.push_back(use);
  };
  // A model that ends in a view (flatten) has its logits in the viewed
  // node's block: logits() reads them after the step, as it reads the last
  // node's own buffer (past the timeline's end: never poisoned either).
  const int logits_owner = owner_of(s.nodes, static_cast<int>(L - 1));
  for (std::size_t i = 0; i < L; ++i) {
    const PlanNode& node = s.nodes[i];
    if (node.layer->is_view() || (node.folded && !node.keeps_buffers) || node.activation.data())
      continue;
    const std::optional<std::size_t> read_until = forward_only_until(s.nodes, i);
    const bool holds_logits = logits_owner == static_cast<int>(i);
    add_block(B * node.stored_elements() * dtype_size(node.output_dtype), i,
              holds_logits ? 2 * L + 1
              : read_until ? *read_until
                           : backward_at(i),
              {BlockKind::activation, i, 0});
  }
  // --layout nhwc: the fp32 input transposed, before node 0's forward, and
  // read as the model's input, by the first nodes' backward too; where the
  // input is narrowed it is transposed straight into stored_input instead.
  if (m->layout_ == Layout::nhwc && !s.narrow_input)
    add_block(B * Shape(input_shape).numel() * sizeof(float), 0, backward_at(0),
              {BlockKind::nhwc_input, 0, 0});
  for (std::size_t g = 0; g < G; ++g)
    if (g != in_place)
      add_block(B * grad_elements[g] * dtype_size(grad_dtype[g]), backward_at(hi[g]),
                backward_at(lo[g]), {BlockKind::gradient, g, 0});
  // Which fp32 sums wait for their reader (PlanNode::waits), under bf16 or
  // fp16 (an fp32 run has no narrowing to join): those whose
  // gradient buffer one node alone reads as its dy, a stored node that
  // narrows it (no view of it runs a backward, no input shares it, no fused
  // node sums into it itself), so that the waiting terms have one place to
  // go, at that node's backward (lo). The first contribution is written into
  // the sum itself; the later ones wait (Inception's block inputs: 2 or 3 of
  // their 3 or 4 branches).
  const std::vector<bool> sum_waits = [&] {
    std::vector<int> reader(G, -1);  // -2: not one stored node
    for (std::size_t i = 0; i < L; ++i) {
      const PlanNode& node = s.nodes[i];
      if (node.grad < 0 || node.layer->is_view()) continue;
      int& r = reader[static_cast<std::size_t>(node.grad)];
      const bool plain = !node.folded && !node.adapted && !node.passes_through &&
                         node.backward_by < 0 && node.fused_ln == nullptr;
      r = plain && r == -1 ? static_cast<int>(i) : -2;
    }
    for (const PlanNode& node : s.nodes) {  // the buffers fused nodes write themselves
      if (node.fused_ln != nullptr) {
        const PlanNode& sum = s.nodes[static_cast<std::size_t>(node.sum_of)];
        if (sum.grad >= 0) reader[static_cast<std::size_t>(sum.grad)] = -2;
      }
      if (node.fused_dgelu != nullptr) {
        const PlanNode& gelu = s.nodes[static_cast<std::size_t>(node.dgelu_of)];
        const PlanNode& pre = s.nodes[static_cast<std::size_t>(gelu.pre_of)];
        for (int g : {gelu.grad, pre.grad})
          if (g >= 0) reader[static_cast<std::size_t>(g)] = -2;
      }
    }
    std::vector<bool> waits(G, false);
    for (std::size_t g = 0; g < G; ++g)
      waits[g] = s.storage != DType::f32 && grad_dtype[g] == DType::f32 && !grad_paired[g] &&
                 g != in_place && reader[g] >= 0 && static_cast<std::size_t>(reader[g]) == lo[g];
    // A paired (16-bit) gradient read by a fused BatchNorm + (add +) ReLU
    // alone (a ResNet block's output, whose readers are the next block's
    // convolution and fused add): its second term waits too, and the fused
    // backward reads the two terms (FusedBatchNormRelu::set_dy_addend)
    // where a pass wrote their sum and the backward read it back.
    // RINGTRAIN_FUSED_DY_TERMS=off keeps that pass (the same bits: a GPU test
    // compares the two).
    const char* terms_env = std::getenv("RINGTRAIN_FUSED_DY_TERMS");
    const std::string terms_mode = terms_env == nullptr ? "" : terms_env;
    RT_CHECK(terms_mode.empty() || terms_mode == "on" || terms_mode == "off",
             "RINGTRAIN_FUSED_DY_TERMS={}: expected on (the default) or off", terms_mode);
    for (std::size_t g = 0; g < G && terms_mode != "off"; ++g) {
      if (!grad_paired[g] || g == in_place || reader[g] < 0 ||
          static_cast<std::size_t>(reader[g]) != lo[g])
        continue;
      const PlanNode& owner = s.nodes[lo[g]];
      if (dynamic_cast<const FusedBatchNormRelu*>(owner.fused.get()) != nullptr) waits[g] = true;
    }
    return waits;
  }();
  // The scratch: where a node's backward puts its contribution to an input's
  // gradient before adding it to a summed one (fp32, or a paired one), or
  // narrowing it into a stored one from a layer that writes fp32 (the
  // adapter; the CPU twin of the DGELU epilogue too). A layer whose dx is on
  // the storage grid writes it there in the storage dtype (the backward's
  // scratch_dtype): half the bytes. It lives at that node's backward alone,
  // or, for a contribution that waits, until the sum's reader's (lo). The
  // first contribution (the backward of the last reader, its first slot)
  // never waits.
  std::vector<bool> first_taken(G, false);
  for (std::size_t i = L; i-- > 0;) {
    PlanNode& node = s.nodes[i];
    node.scratch.assign(node.inputs.size(), nullptr);
    node.waits.assign(node.inputs.size(), false);
    if (node.layer->is_view() || node.grad < 0) continue;
    for (std::size_t k = 0; k < node.inputs.size(); ++k) {
      const int j = node.inputs[k];
      if (j < 0) continue;
      const PlanNode& input = s.nodes[static_cast<std::size_t>(j)];
      if (input.grad < 0 || !input.below_params) continue;
      const auto g = static_cast<std::size_t>(input.grad);
      const bool first = !first_taken[g];
      first_taken[g] = true;
      node.waits[k] = sum_waits[g] && !first;
      const std::size_t value_bytes =
          writes_dx_on_grid(node, k) ? dtype_size(s.storage) : sizeof(float);
      if (grad_dtype[g] == DType::f32 || grad_paired[g] || node.adapted)
        add_block(B * grad_elements[g] * value_bytes, backward_at(i),
                  node.waits[k] ? backward_at(lo[g]) : backward_at(i), {BlockKind::scratch, i, k});
    }
  }
  s.waiting.assign(G, {});
  for (std::vector<BufferView>& w : s.waiting) w.reserve(kNarrowSumMaxTerms);
  // One allocation, 256-byte aligned blocks (cuDNN's and cuBLASLt's operands
  // want 16).
  const BlockLayout layout = pack_live_blocks(blocks, 256);
  s.arena = Tensor::empty({std::max<std::size_t>((layout.bytes + 3) / 4, 1)}, DType::f32, dev);
  std::vector<void*> grad_data(G, nullptr);
  if (reuse_mode == "poison") s.dies_at.resize(2 * L + 2);  // 2L + 1: outlives the step
  for (std::size_t b = 0; b < blocks.size(); ++b) {
    void* at = static_cast<char*>(s.arena.data()) + layout.offsets[b];
    if (!s.dies_at.empty()) s.dies_at[blocks[b].death].emplace_back(at, blocks[b].bytes);
    const BlockUse& use = uses[b];
    if (use.kind == BlockKind::activation) {
      PlanNode& node = s.nodes[use.index];
      node.activation = Tensor::borrow(at, {B * node.stored_elements()}, node.output_dtype, dev);
    } else if (use.kind == BlockKind::gradient) {
      grad_data[use.index] = at;
    } else if (use.kind == BlockKind::nhwc_input) {
      s.nhwc_input = Tensor::borrow(at, {B * Shape(input_shape).numel()}, DType::f32, dev);
    } else {
      s.nodes[use.index].scratch[use.slot] = at;
    }
  }
  for (std::size_t g = 0; g < G; ++g) {
    s.grad_buffers.push_back(
        {g == in_place ? last.activation.data() : grad_data[g], grad_dtype[g], grad_elements[g]});
    s.grad_buffers.back().paired = grad_paired[g];
    s.grad_buffers.back().read_as_two = grad_paired[g] && sum_waits[g];
  }
  // Per sample: what the activations take (the arena of outputs, gradients
  // and scratch; the outputs apart; the input's copies), and the workspace
  // shared by the layers (the adapter's and the widening scratch, sized for
  // the largest layer, not for the depth).
  std::size_t bytes = (layout.bytes + B - 1) / B, workspace = 0;
  for (const PlanNode& node : s.nodes)
    if (node.activation.owns_memory())
      bytes += node.stored_elements() * dtype_size(node.output_dtype);
  if (s.storage != DType::f32) {
    std::size_t widest = 0, wide_inputs = 0, widest_grad = 0;
    for (std::size_t i = 0; i < L; ++i) {
      const PlanNode& node = s.nodes[i];
      if (node.layer->is_view()) continue;
      const std::size_t n = node.layer->output_shape().numel();
      if (node.adapted) {
        widest = std::max(widest, n);
        for (int j : node.inputs)
          widest = std::max(
              widest, j < 0 ? Shape(input_shape).numel()
                            : s.nodes[static_cast<std::size_t>(j)].layer->output_shape().numel());
        wide_inputs = std::max(wide_inputs, node.inputs.size());
      }
      if (node.grad >= 0 && (node.adapted || s.grad_of(i).dtype != s.storage))
        widest_grad = std::max(widest_grad, n);
    }
    for (std::size_t k = 0; k < wide_inputs; ++k)
      s.widened.push_back(Tensor::empty({B * widest}, DType::f32, dev));
    if (widest > 0) s.wide_output = Tensor::empty({B * widest}, DType::f32, dev);
    if (widest_grad > 0) s.wide_grad = Tensor::empty({B * widest_grad}, DType::f32, dev);
    workspace +=
        (wide_inputs + (widest > 0 ? 1 : 0)) * widest * sizeof(float) + widest_grad * sizeof(float);
    if (s.narrow_input) bytes += Shape(input_shape).numel() * dtype_size(s.storage);
  }
  s.x_views.reserve(slots);
  s.dx_views.reserve(slots);
  s.xs.reserve(slots);
  s.dxs.reserve(slots);
  s.to_add.reserve(slots);
  s.to_narrow.reserve(slots);
  workspace += fused_workspace * sizeof(float);  // the fused convolutions' and CPU twins'
  m->activation_bytes_per_sample_ = bytes;
  m->workspace_bytes_per_sample_ = workspace;
  const std::size_t label_rows = B * m->rows_per_sample_;
  s.labels = Tensor::empty({label_rows}, DType::i32, dev);
  if (dev.is_cuda()) {
    s.row_loss = Tensor::empty({label_rows}, DType::f32, dev);
    s.row_correct = Tensor::empty({label_rows}, DType::i32, dev);
  }
  s.loss_totals = Tensor::empty({kernels::kLossTotalsCount}, DType::f64, dev);
  device_zero(s.loss_totals.data(), s.loss_totals.buffer().bytes(), dev);
  return m;
}

BufferView Model::params() {
  return state_->params.buffer();
}
float* Model::layer_params(const Layer& owner) {
  State& s = *state_;
  return options_.precision == DType::f32 || !owner.matmul_weights()
             ? s.params.data_as<float>()
             : s.compute_params.data_as<float>();
}
BufferView Model::grads() {
  return state_->grads;
}
BufferView Model::buffers() {
  return {state_->buffers.data(), buffer_count_, DType::f32, options_.device};
}
std::vector<std::string> Model::node_inputs(std::size_t layer) const {
  RT_CHECK(layer < layer_count(), "layer {} out of range (the model has {})", layer, layer_count());
  std::vector<std::string> names;
  const PlanNode& node = state_->nodes[layer];
  for (int j : node.written_inputs.empty() ? node.inputs : node.written_inputs)
    names.push_back(j < 0 ? "input" : state_->nodes[static_cast<std::size_t>(j)].layer->name());
  return names;
}
std::size_t Model::layer_count() const {
  return state_->nodes.size();
}
std::string Model::layer_name(std::size_t layer) const {
  RT_CHECK(layer < layer_count(), "layer {} out of range (the model has {})", layer, layer_count());
  return state_->nodes[layer].layer->name();
}
std::string Model::layer_kind(std::size_t layer) const {
  RT_CHECK(layer < layer_count(), "layer {} out of range (the model has {})", layer, layer_count());
  return state_->nodes[layer].kind;
}
std::string Model::layer_kernels(std::size_t layer) const {
  RT_CHECK(layer < layer_count(), "layer {} out of range (the model has {})", layer, layer_count());
  const PlanNode& node = state_->nodes[layer];
  if (node.folded) return "folded into " + node.folded_into;
  if (node.forward_by >= 0)
    return "forward fused into " +
           state_->nodes[static_cast<std::size_t>(node.forward_by)].layer->name();
  std::string kernels =
      node.describes != nullptr ? node.describes->describe_kernels() : std::string();
  if (node.grad >= 0 && state_->grad_buffers[static_cast<std::size_t>(node.grad)].paired)
    kernels += fmt::format("{}gradient: its two readers' {} contributions {}",
                           kernels.empty() ? "" : "; ", dtype_name(state_->storage),
                           state_->grad_buffers[static_cast<std::size_t>(node.grad)].read_as_two
                               ? "summed as its fused backward reads them"
                               : "summed in one pass");
  return kernels;
}
Model::LinearGeluPairs Model::linear_gelu_pairs() const {
  LinearGeluPairs pairs;
  pairs.gelu_nodes = state_->linear_gelu_candidates;
  pairs.fused = std::any_of(state_->nodes.begin(), state_->nodes.end(),
                            [](const PlanNode& n) { return n.fused_gelu != nullptr; });
  return pairs;
}

void Model::set_interval_timer(IntervalTimer* timer) {
  RT_CHECK(timer == nullptr || timer->size() >= profile_slots().count(),
           "the layer timer has {} intervals; the model marks {}", timer ? timer->size() : 0,
           profile_slots().count());
  state_->timer = timer;
}
std::vector<std::size_t> Model::layer_output_shape(std::size_t layer) const {
  RT_CHECK(layer < layer_count(), "layer {} out of range (the model has {})", layer, layer_count());
  return state_->nodes[layer].layer->output_shape().to_vector();
}

DType Model::layer_output_dtype(std::size_t layer) const {
  RT_CHECK(layer < layer_count(), "layer {} out of range (the model has {})", layer, layer_count());
  return state_->nodes[layer].output_dtype;
}

std::pair<std::size_t, std::size_t> Model::layer_param_range(std::size_t layer) const {
  RT_CHECK(layer < layer_count(), "layer {} out of range (the model has {})", layer, layer_count());
  return state_->nodes[layer].param_range;
}

std::string Model::summary() const {
  std::string out = fmt::format("{:<4} {:<10} {:<18} {:>10}\n", "#", "layer", "output", "params");
  for (std::size_t i = 0; i < layer_count(); ++i) {
    const PlanNode& node = state_->nodes[i];
    const auto [b, e] = node.param_range;
    out += fmt::format("{:<4} {:<10} {:<18} {:>10}\n", i, node.layer->name(),
                       node.layer->output_shape().to_string(), e - b);
  }
  out += fmt::format("total parameters: {}  (spec hash {:016x})\n", param_count_, spec_.hash());
  return out;
}

void Model::bind_gradient_buffer(BufferView grads) {
  RT_CHECK(grads.dtype == DType::f32, "gradient buffer must be f32, got {}",
           dtype_name(grads.dtype));
  RT_CHECK(grads.count == param_count_,
           "gradient buffer has {} elements but the model has {} parameters", grads.count,
           param_count_);
  RT_CHECK(grads.device == options_.device, "gradient buffer is on {} but the model is on {}",
           device_name(grads.device), device_name(options_.device));
  RT_CHECK(grads.ptr != nullptr || param_count_ == 0, "gradient buffer is null");
  State& s = *state_;
  s.grads = grads;
  bind_layers(static_cast<float*>(grads.ptr));
  s.grads_owned = Tensor();
}

void Model::bind_layers(float* grads) {
  State& s = *state_;
  for (PlanNode& node : s.nodes) {
    const PlanNode& owner = s.nodes[node.bind_from];
    const std::size_t from = owner.param_range.first;
    node.layer->bind(layer_params(*owner.layer) + from, grads + from);
  }
}

void Model::set_batch_stat_reducer(BatchStatReducer* reducer) {
  for (PlanNode& node : state_->nodes) node.layer->set_batch_stat_reducer(reducer);
}

bool Model::draws_dropout_masks() const {
  for (const PlanNode& node : state_->nodes) {
    const Layer* layer = node.layer.get();
    if (const auto* d = dynamic_cast<const DropoutLayer*>(layer); d != nullptr && d->rate() > 0)
      return true;
    if (const auto* a = dynamic_cast<const CausalSelfAttentionLayer*>(layer);
        a != nullptr && a->attention_dropout() > 0)
      return true;
  }
  return false;
}

std::string Model::layer_type_unsafe_in_cuda_graph() const {
  for (const LayerSpec& l : spec_.layers) {
    if (l.kind != LayerKind::custom) continue;  // the built-in ones: draws_dropout_masks
    const LayerType* t = LayerRegistry::global().find(l.type);
    if (t != nullptr && !t->cuda_graph) return fmt::format("'{}' from {}", t->name, t->origin);
  }
  return {};
}

void Model::set_dropout_context(std::uint64_t rank, std::uint64_t step) {
  state_->dropout.rank = rank;
  state_->dropout.step = step;
}

namespace {
// The fp32 form of `v` for a layer that takes only fp32: v itself, or v
// widened into `wide`.
const float* widen_for_layer(const ComputeContext& ctx, const BufferView& v, Tensor& wide) {
  if (v.dtype == DType::f32) return v.as<const float>();
  BufferView to = wide.buffer().slice(0, v.count);
  convert_storage(ctx, to, v);
  return to.as<const float>();
}
// The same for the rows of a padded node's output or gradient (PlanNode::
// padded), widened into unpadded rows: what the layer's fp32 form reads.
const float* widen_rows_for_layer(const ComputeContext& ctx, const PlanNode& node,
                                  const BufferView& v, Tensor& wide) {
  if (!node.padded()) return widen_for_layer(ctx, v, wide);
  const std::size_t rows = v.count / node.row_stride;
  BufferView to = wide.buffer().slice(0, rows * node.row_width);
  copy_blocks(ctx, to, node.row_width, v, node.row_stride, node.row_width, rows);
  return to.as<const float>();
}
}  // namespace

BufferView Model::run_layers(const float* x, const std::int32_t* labels, std::size_t batch,
                             bool training) {
  State& s = *state_;
  RT_CHECK(batch <= options_.max_batch, "batch {} exceeds the model's max_batch {}", batch,
           options_.max_batch);
  mark_start(s.timer, profile_slots().prepare());
  // The data arrive NCHW, as stored: channels-last starts here, once, on the
  // model's device, in the same pass as the narrowing where the input is
  // stored in 16 bits (the rounding of each element does not depend on where
  // it goes: the bits of a transpose and a narrowing apart).
  const std::size_t input_elements = batch * Shape(input_shape_).numel();
  const DType precision = options_.precision;
  s.input = BufferView{const_cast<float*>(x), input_elements, DType::f32, options_.device};
  if (s.narrow_input) {
    const BufferView stored = s.stored_input.buffer().slice(0, input_elements);
    if (batch > 0 && layout_ == Layout::nhwc)
      transpose_batched(*s.ctx, s.input, stored, batch, input_shape_[0],
                        input_shape_[1] * input_shape_[2]);
    else if (batch > 0)
      convert_storage(*s.ctx, stored, s.input);
    s.input = stored;
  } else if (layout_ == Layout::nhwc) {
    const BufferView to = s.nhwc_input.buffer().slice(0, input_elements);
    if (batch > 0)
      transpose_batched(*s.ctx, s.input, to, batch, input_shape_[0],
                        input_shape_[1] * input_shape_[2]);
    s.input = to;
  }
  if (precision != DType::f32) {
    // The low-precision weights are cast from the master weights at every
    // forward: one pass over the flat buffer, and nothing that writes the
    // master weights (optimizer, resume, broadcast, --init-from) can leave
    // them stale.
    round_to_precision(*s.ctx, s.compute_params.data_as<float>(), s.params.data_as<float>(),
                       param_count_, precision);
  }
  mark_stop(s.timer, profile_slots().prepare());
  for (std::size_t i = 0; i < s.nodes.size(); ++i) {
    if (i > 0 && batch > 0) s.poison(i - 1);  // what died at the previous node's forward
    PlanNode& node = s.nodes[i];
    Layer& layer = *node.layer;
    mark_start(s.timer, ProfileSlots::forward(i));
    const std::size_t n = batch * layer.output_shape().numel();
    if (node.folded || node.forward_by >= 0) {  // run by its fused node, later in the list
      if (node.keeps_buffers || node.forward_by >= 0)
        node.output = node.activation.buffer().slice(0, n);
      mark_stop(s.timer, ProfileSlots::forward(i));
      continue;
    }
    if (layer.is_view()) {
      node.output = s.read(node.inputs[0]);
      node.output.count = n;
      mark_stop(s.timer, ProfileSlots::forward(i));
      continue;
    }
    node.output = node.activation.buffer().slice(0, batch * node.stored_elements());
    std::vector<BufferView>& xs = s.x_views;
    xs.clear();
    for (int j : node.inputs) xs.push_back(s.read(j));
    if (batch > 0 && node.fused_ln != nullptr) {
      node.fused_ln->forward(xs, s.nodes[static_cast<std::size_t>(node.sum_of)].output, node.output,
                             batch);
    } else if (batch > 0 && node.fused_gelu != nullptr) {
      const PlanNode& lin = s.nodes[static_cast<std::size_t>(node.pre_of)];
      node.fused_gelu->forward(s.read(lin.inputs[0]), lin.output, node.output, batch, training);
    } else if (batch > 0 && !node.adapted) {
      node.stores->forward_stored(xs, node.output, batch, training);
    } else if (batch > 0) {
      // The adapter: fp32 in, fp32 out, narrowed into the node's storage.
      std::vector<const float*>& wide = s.xs;
      wide.clear();
      for (std::size_t k = 0; k < xs.size(); ++k)
        wide.push_back(
            widen_for_layer(*s.ctx, xs[k], s.widened.empty() ? s.wide_output : s.widened[k]));
      float* out = node.output_dtype == DType::f32 && !node.padded()
                       ? node.output.as<float>()
                       : s.wide_output.data_as<float>();
      if (layer.takes_many_inputs())
        layer.forward_many(wide, out, batch, training);
      else
        layer.forward(wide[0], out, batch, training);
      if (node.padded())  // the true columns narrowed into the padded rows
        copy_blocks(*s.ctx, node.output, node.row_stride, view_of(out, n, options_.device),
                    node.row_width, node.row_width, n / node.row_width);
      else if (node.output_dtype != DType::f32)
        convert_storage(*s.ctx, node.output, view_of(out, n, options_.device));
    }
    mark_stop(s.timer, ProfileSlots::forward(i));
  }
  if (batch > 0) s.poison(s.nodes.size() - 1);
  s.last_batch = batch;
  s.forward_done = true;
  s.activations_live = true;
  s.loss_gradient_done = false;
  // In the compute stream's order: copy_view would wait for the device (a
  // host sync every step) and use the legacy stream, which a CUDA graph's
  // capture refuses.
  if (batch > 0 && labels != s.labels.data_as<std::int32_t>()) {
    const std::size_t rows = batch * rows_per_sample_;
    copy_blocks(*s.ctx, s.labels.buffer().slice(0, rows), rows,
                view_of(labels, rows, options_.device), rows, rows, 1);
  }
  return s.nodes.back().output;
}

Model::LossResult Model::forward(const float* x, const std::int32_t* labels, std::size_t batch,
                                 bool training) {
  State& s = *state_;
  const BufferView logits = run_layers(x, labels, batch, training);
  if (batch == 0) return {};
  if (options_.device.is_cuda()) host_sync::note(options_.device, "model: read the loss");
  mark_start(s.timer, profile_slots().loss_forward());
  const SoftmaxCrossEntropyResult r = softmax_cross_entropy_forward(
      *s.ctx, logits, s.labels.data_as<std::int32_t>(), batch * rows_per_sample_, num_classes_,
      logits_row_stride(), s.row_loss.data_as<float>(), s.row_correct.data_as<std::int32_t>());
  mark_stop(s.timer, profile_slots().loss_forward());
  return {r.loss_sum, r.correct, r.counted};
}

void Model::forward_accumulate(const float* x, const std::int32_t* labels, std::size_t batch,
                               bool training) {
  State& s = *state_;
  const BufferView logits = run_layers(x, labels, batch, training);
  mark_start(s.timer, profile_slots().loss_forward());
  softmax_cross_entropy_accumulate(
      *s.ctx, logits, s.labels.data_as<std::int32_t>(), batch * rows_per_sample_, num_classes_,
      logits_row_stride(), s.row_loss.data_as<float>(), s.row_correct.data_as<std::int32_t>(),
      s.loss_totals.data_as<double>(), options_.label_smoothing, label_mix_);
  mark_stop(s.timer, profile_slots().loss_forward());
}

void Model::forward_accumulate_fused_loss(const float* x, const std::int32_t* labels,
                                          std::size_t batch, float grad_scale) {
  State& s = *state_;
  const BufferView logits = run_layers(x, labels, batch, true);
  if (batch == 0) return;  // backward zeroes (or keeps) the gradients
  const std::size_t rows = batch * rows_per_sample_;
  mark_start(s.timer, profile_slots().loss_forward());
  // The scale backward would pass, computed as it computes it.
  softmax_cross_entropy_accumulate_backward(
      *s.ctx, logits, s.labels.data_as<std::int32_t>(), rows, num_classes_, logits_row_stride(),
      s.row_loss.data_as<float>(), s.row_correct.data_as<std::int32_t>(),
      s.loss_totals.data_as<double>(), grad_scale / static_cast<float>(rows),
      s.grad_of(s.nodes.size() - 1).view(batch, options_.device), options_.label_smoothing,
      label_mix_);
  mark_stop(s.timer, profile_slots().loss_forward());
  s.loss_gradient_done = true;
  s.loss_gradient_scale = grad_scale;
}

Model::LossResult Model::take_loss_totals() {
  State& s = *state_;
  double totals[kernels::kLossTotalsCount] = {};
  // One counted host sync: on a GPU the copy (on the default stream, behind
  // the model's blocking stream) waits for every queued forward and counts
  // itself; on the CPU the same point is counted here, so both paths report
  // the same number.
  if (options_.device.is_cpu()) host_sync::note(options_.device, "model: read the loss totals");
  copy_view(view_of(totals, kernels::kLossTotalsCount), s.loss_totals.buffer());
  device_zero(s.loss_totals.data(), sizeof(totals), options_.device);
  RT_CHECK(totals[2] == 0,
           "{} sample(s) since the last loss read had a label outside [0, {}): the labels do not "
           "match the "
           "model's {} classes",
           static_cast<std::uint64_t>(totals[2]), num_classes_, num_classes_);
  return {totals[0], static_cast<std::size_t>(totals[1]), 0};
}

void Model::backward(float grad_scale, bool accumulate,
                     const std::function<void(std::size_t layer)>& on_layer_ready) {
  State& s = *state_;
  RT_CHECK(s.forward_done, "backward called without a forward");
  RT_CHECK(s.activations_live,
           "backward called twice after one forward: the first reused its activations' memory "
           "for their gradients");
  const std::size_t batch = s.last_batch;
  const std::size_t L = s.nodes.size();
  const Device dev = options_.device;
  RT_CHECK(!s.loss_gradient_done || grad_scale == s.loss_gradient_scale,
           "backward's grad_scale {} is not the {} its fused forward used", grad_scale,
           s.loss_gradient_scale);
  s.activations_live = false;  // the arguments taken: from here it overwrites
  if (batch == 0) {
    if (!accumulate) zero_grads();
    for (std::size_t i = L; i-- > 0;)
      if (on_layer_ready) on_layer_ready(i);
    return;
  }
  for (GradientBuffer& g : s.grad_buffers) g.written = false;
  for (std::vector<BufferView>& w : s.waiting) w.clear();  // a backward that threw left some
  // The contributions waiting for gradient g added into its fp32 sum, in
  // their order: before anything else reads or adds to it.
  const auto add_waiting = [&](int g) {
    std::vector<BufferView>& waiting = s.waiting[static_cast<std::size_t>(g)];
    if (waiting.empty()) return;
    const GradientBuffer& grad = s.grad_buffers[static_cast<std::size_t>(g)];
    const BufferView sum = grad.view(batch, dev);
    for (const BufferView& term : waiting) {
      if (grad.paired)  // the second of two, both on the grid
        sum_two_stored(*s.ctx, sum, sum, term, 1.0f);
      else if (term.dtype == DType::f32)
        add_scaled(*s.ctx, sum.as<float>(), term.as<float>(), 1.0f, sum.count);
      else
        add_widened(*s.ctx, sum, term);
    }
    waiting.clear();
  };
  // The mean over the batch's rows: a language model's sample loss is the
  // mean over its T tokens (ignored labels add 0).
  const std::size_t rows = batch * rows_per_sample_;
  mark_start(s.timer, profile_slots().loss_backward());
  GradientBuffer& logits_grad = s.grad_of(L - 1);
  if (!s.loss_gradient_done) {  // else written by the forward, at this scale (checked above)
    softmax_cross_entropy_backward(
        *s.ctx, s.nodes[L - 1].output, s.labels.data_as<std::int32_t>(), rows, num_classes_,
        logits_row_stride(), grad_scale / static_cast<float>(rows), logits_grad.view(batch, dev),
        options_.label_smoothing, label_mix_);
  }
  mark_stop(s.timer, profile_slots().loss_backward());
  logits_grad.written = true;
  std::vector<BufferView>& xs = s.x_views;
  std::vector<BufferView>& dxs = s.dx_views;
  std::vector<State::Contribution>& to_add = s.to_add;
  std::vector<std::pair<std::size_t, int>>& to_narrow = s.to_narrow;
  for (std::size_t i = L; i-- > 0;) {
    if (i + 1 < L) s.poison(2 * L - (i + 1));  // what died at the previous node's backward
    PlanNode& node = s.nodes[i];
    Layer& layer = *node.layer;
    // A gelu whose backward its reader's dx GEMM ran (fuse_linear_dgelu).
    if (node.backward_by >= 0 &&
        s.nodes[static_cast<std::size_t>(node.backward_by)].fused_dgelu->wrote_pre_gradient()) {
      if (on_layer_ready) on_layer_ready(i);
      continue;
    }
    // A folded node's backward is its fused node's.
    if (!layer.is_view() && node.grad >= 0 && !node.folded) {
      mark_start(s.timer, ProfileSlots::backward(i));
      // A view's gradient is its input's buffer: nothing to do.
      const GradientBuffer& out_grad = s.grad_of(i);
      BufferView dy = out_grad.view(batch, dev);
      // A summed fp32 gradient is rounded to the storage grid once, now that
      // every contribution is in (a stored gradient is on it already): below,
      // in the pass that narrows it for a layer that reads 16 bits, else here.
      const bool summed = s.storage != DType::f32 && dy.dtype == DType::f32;
      xs.clear();
      dxs.clear();
      to_add.clear();
      to_narrow.clear();
      // What a contribution to a summed gradient, or a dx to narrow, is
      // written into first: slot k's scratch, fp32; or, for a layer whose
      // fp32 dx would be its 16-bit dx widened (a GPU's 16-bit convolution),
      // the 16-bit dx itself, widened as it is added to an fp32 sum (one pass
      // over it where the widening into fp32 scratch took two), or added to
      // a paired sum in 16 bits.
      const auto scratch_dtype = [&](std::size_t k) {
        return writes_dx_on_grid(node, k) ? s.storage : DType::f32;
      };
      const auto scratch_of = [&](std::size_t k, const GradientBuffer& in_grad) {
        RT_CHECK(node.scratch[k] != nullptr, "model: '{}' has no scratch for its input {}",
                 layer.name(), k);
        return BufferView{node.scratch[k], batch * in_grad.elements, scratch_dtype(k), dev};
      };
      for (std::size_t k = 0; k < node.inputs.size(); ++k) {
        const int j = node.inputs[k];
        const PlanNode* input = j < 0 ? nullptr : &s.nodes[static_cast<std::size_t>(j)];
        xs.push_back(s.read(j));
        const int g = input == nullptr ? -1 : input->grad;
        const BufferView none{nullptr, 0, DType::f32, dev};
        if (g < 0 || !input->below_params) {
          dxs.push_back(none);
        } else if (node.passes_through && g == node.grad) {
          dxs.push_back(none);  // its gradient is dy, in dy's buffer
        } else if (GradientBuffer& in_grad = s.grad_buffers[static_cast<std::size_t>(g)];
                   in_grad.written) {
          // A later contribution to a summed (fp32) gradient: added now, or
          // left in its scratch for the sum's reader.
          dxs.push_back(scratch_of(k, in_grad));
          to_add.push_back({k, g, node.waits[k]});
        } else if ((node.adapted && in_grad.dtype != DType::f32) ||
                   (scratch_dtype(k) != DType::f32 && in_grad.dtype == DType::f32)) {
          // Computed in fp32 by the layer, narrowed into the buffer; or the
          // first contribution to a summed gradient in 16 bits, widened.
          dxs.push_back(scratch_of(k, in_grad));
          to_narrow.emplace_back(k, g);
          in_grad.written = true;
        } else {
          dxs.push_back(in_grad.view(batch, dev));
          in_grad.written = true;
        }
      }
      // A linear whose dx GEMM runs the gelu's backward writes the gradient
      // of the gelu's input (the pre-activation) instead of the gelu's own.
      GradientBuffer* d_pre = nullptr;
      BufferView pre;
      if (node.fused_dgelu != nullptr) {
        const PlanNode& gelu = s.nodes[static_cast<std::size_t>(node.dgelu_of)];
        const PlanNode& pre_node = s.nodes[static_cast<std::size_t>(gelu.pre_of)];
        d_pre = &s.grad_buffers[static_cast<std::size_t>(pre_node.grad)];
        add_waiting(pre_node.grad);
        pre = pre_node.output;
        RT_CHECK(!d_pre->written && dxs.at(0).ptr != nullptr,
                 "model: '{}''s gradient is written before its fused backward", gelu.layer->name());
      }
      // A fused node computes its BatchNorm's parameter gradients.
      const bool has_params =
          node.param_range.second > node.param_range.first || node.fused != nullptr;
      const bool any_dx =
          std::any_of(dxs.begin(), dxs.end(), [](const BufferView& v) { return v.ptr != nullptr; });
      // A node with no parameters and no consumer of its dx has nothing to do.
      const bool narrow_dy = summed && (any_dx || has_params) && !node.adapted;
      std::vector<BufferView>& waiting = s.waiting[static_cast<std::size_t>(node.grad)];
      // A paired gradient's second term, read beside dy by the fused
      // BatchNorm + (add +) ReLU's backward (the plan's waits).
      if (out_grad.read_as_two && waiting.size() == 1 && !node.adapted && (any_dx || has_params))
        if (auto* fused_bn = dynamic_cast<FusedBatchNormRelu*>(node.fused.get())) {
          fused_bn->set_dy_addend(waiting[0]);
          waiting.clear();
        }
      if (!narrow_dy) add_waiting(node.grad);
      if (summed && !narrow_dy)
        round_to_precision(*s.ctx, dy.as<float>(), dy.as<float>(), dy.count, s.storage);
      if ((any_dx || has_params) && !node.adapted) {
        if (narrow_dy) {  // a summed gradient, narrowed (rounded once) for the layer
          // Round to nearest even straight into 16 bits: the rounded fp32 sum
          // itself is read by nothing after this, so it is not written back.
          // The contributions still waiting are added in the same pass.
          const BufferView narrowed{s.wide_grad.data(), dy.count, s.storage, dev};
          if (waiting.empty())
            convert_storage(*s.ctx, narrowed, dy);
          else
            narrow_sum(*s.ctx, narrowed, dy, waiting);
          waiting.clear();
          dy = narrowed;
        }
        if (node.fused_ln != nullptr) {
          PlanNode& sum = s.nodes[static_cast<std::size_t>(node.sum_of)];
          GradientBuffer& d_sum = s.grad_buffers[static_cast<std::size_t>(sum.grad)];
          add_waiting(sum.grad);
          node.fused_ln->backward(sum.output, dy, d_sum.view(batch, dev), d_sum.written, dxs, batch,
                                  accumulate);
          d_sum.written = true;
        } else if (d_pre != nullptr) {
          node.fused_dgelu->backward_stored(xs[0], dy, pre, d_pre->view(batch, dev), dxs[0], batch,
                                            accumulate);
          d_pre->written = node.fused_dgelu->wrote_pre_gradient();
        } else {
          node.stores->backward_stored(xs, node.output, dy, dxs, batch, accumulate);
        }
      } else if (any_dx || has_params) {
        // The adapter: the layer sees fp32 x, y and dy and writes fp32 dx.
        std::vector<const float*>& wide = s.xs;
        std::vector<float*>& dx = s.dxs;
        wide.clear();
        dx.clear();
        for (std::size_t k = 0; k < xs.size(); ++k) {
          wide.push_back(
              widen_for_layer(*s.ctx, xs[k], s.widened.empty() ? s.wide_output : s.widened[k]));
          dx.push_back(dxs[k].as<float>());
        }
        const float* y = node.backward_reads_output
                             ? widen_rows_for_layer(*s.ctx, node, node.output, s.wide_output)
                             : nullptr;
        const float* dy_wide = widen_rows_for_layer(*s.ctx, node, dy, s.wide_grad);
        // The CPU twin of the DGELU epilogue: the layer's fp32 dx in the
        // slot's scratch, never narrowed into the gelu's gradient.
        float* twin_dx = nullptr;
        if (d_pre != nullptr) {
          twin_dx = scratch_of(0, *d_pre).as<float>();
          dx[0] = twin_dx;
          to_narrow.erase(std::remove_if(to_narrow.begin(), to_narrow.end(),
                                         [](const auto& e) { return e.first == 0; }),
                          to_narrow.end());
        }
        if (layer.takes_many_inputs())
          layer.backward_many(wide, y, dy_wide, dx, batch, accumulate);
        else
          layer.backward(wide[0], y, dy_wide, dx[0], batch, accumulate);
        if (d_pre != nullptr) {
          node.fused_dgelu->backward_twin(twin_dx, pre, d_pre->view(batch, dev), accumulate);
          d_pre->written = true;
        }
      }
      for (const auto& [k, g] : to_narrow) {
        const GradientBuffer& in_grad = s.grad_buffers[static_cast<std::size_t>(g)];
        convert_storage(*s.ctx, in_grad.view(batch, dev), scratch_of(k, in_grad));
      }
      // In slot order, as the contributions are made: each waits, or is
      // added after those waiting.
      for (const auto& [k, g, waits] : to_add) {
        const GradientBuffer& in_grad = s.grad_buffers[static_cast<std::size_t>(g)];
        RT_CHECK(!in_grad.paired || scratch_dtype(k) == in_grad.dtype,
                 "model: '{}''s contribution to a paired {} gradient in {}", layer.name(),
                 dtype_name(in_grad.dtype), dtype_name(scratch_dtype(k)));
        if (waits) {
          std::vector<BufferView>& terms = s.waiting[static_cast<std::size_t>(g)];
          const BufferView term = scratch_of(k, in_grad);
          // narrow_sum's terms are of one dtype, and a few: the others first.
          if (!terms.empty() &&
              (terms.size() == kNarrowSumMaxTerms || terms[0].dtype != term.dtype))
            add_waiting(g);
          terms.push_back(term);
          continue;
        }
        add_waiting(g);
        if (in_grad.paired) {  // the second of two, both on the grid
          const BufferView sum = in_grad.view(batch, dev);
          sum_two_stored(*s.ctx, sum, sum, scratch_of(k, in_grad), 1.0f);
          continue;
        }
        RT_CHECK(in_grad.dtype == DType::f32, "model: a second contribution to a {} gradient",
                 dtype_name(in_grad.dtype));
        if (scratch_dtype(k) == DType::f32)
          add_scaled(*s.ctx, static_cast<float*>(in_grad.data), scratch_of(k, in_grad).as<float>(),
                     1.0f, batch * in_grad.elements);
        else
          add_widened(*s.ctx, in_grad.view(batch, dev), scratch_of(k, in_grad));
      }
      mark_stop(s.timer, ProfileSlots::backward(i));
    }
    if (on_layer_ready) on_layer_ready(i);
  }
  s.poison(2 * L);  // the first node's backward
}

BufferView Model::logits() const {
  RT_CHECK(state_->forward_done, "logits() called before any forward");
  return state_->nodes.back().output;
}

std::size_t Model::logits_row_stride() const {
  const PlanNode& last = state_->nodes.back();
  return last.padded() ? last.row_stride : num_classes_;
}

void Model::copy_logits(std::size_t first, float* host, std::size_t count) const {
  if (count == 0) return;
  const std::size_t classes = num_classes_, stride = logits_row_stride();
  RT_CHECK(first + count <= logits().count / stride * classes,
           "copy_logits: logits [{}, {}) of the last forward's {}", first, first + count,
           logits().count / stride * classes);
  // The rows that hold [first, first + count) of the unpadded logits, as
  // stored (padded rows: one copy of the span, not one per row).
  const std::size_t row0 = first / classes, at = first % classes;
  const std::size_t rows = (at + count + classes - 1) / classes;
  const std::size_t span = (rows - 1) * stride + classes;
  const BufferView from = logits().slice(row0 * stride, span);
  // The words to the host, widened there (exact), then the unpadded columns.
  thread_local std::vector<std::uint32_t> words;
  words.resize((span * dtype_size(from.dtype) + 3) / 4);
  copy_view(BufferView{words.data(), span, from.dtype, Device::cpu()}, from);
  kernels::with_storage(from.dtype, [&](auto t) {
    using T = decltype(t);
    const T* w = reinterpret_cast<const T*>(words.data());
    for (std::size_t i = 0; i < count; ++i) {
      const std::size_t k = at + i;  // from the start of row row0, unpadded
      host[i] = kernels::load(w, k / classes * stride + k % classes);
    }
  });
}

void Model::zero_grads() {
  // In the compute stream's order (device_zero's memset runs on the legacy
  // stream, which a CUDA graph's capture refuses).
  zero_stored(*state_->ctx, state_->grads);
}

BufferView Model::loss_totals_view() const {
  return state_->loss_totals.buffer();
}

void* Model::compute_stream() const {
  return state_->ctx->stream();
}
void Model::synchronize() const {
  state_->ctx->synchronize();
}

}  // namespace ringtrain
