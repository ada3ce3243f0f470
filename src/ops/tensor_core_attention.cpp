#include "ops/tensor_core_attention.h"

#include <algorithm>
#include <cstdint>

#include <fmt/format.h>

#include "core/stream_graph.h"
#include "ops/cudnn_graph.h"
#include "ops/gpu_ops.h"
#include "ringtrain/core/check.h"

namespace ringtrain {

struct TensorCoreAttention::Entry {
  std::size_t batch = 0;
  std::unique_ptr<detail::AttentionGraphs> graphs;
};

namespace {

detail::AttentionShape shape_of(std::size_t batch, std::size_t t, std::size_t c, std::size_t heads,
                                DType dtype) {
  return {batch, t, c, heads, dtype};
}

std::uint16_t* bits(const Tensor& t) {
  return t.data_as<std::uint16_t>();
}

}  // namespace

TensorCoreAttention::TensorCoreAttention(const ComputeContext& ctx, std::size_t t, std::size_t c,
                                         std::size_t heads, std::size_t max_batch)
    : ctx_(ctx), t_(t), c_(c), heads_(heads), max_batch_(max_batch) {}

TensorCoreAttention::~TensorCoreAttention() = default;

std::unique_ptr<TensorCoreAttention> TensorCoreAttention::make(const ComputeContext& ctx,
                                                               std::size_t t, std::size_t c,
                                                               std::size_t heads,
                                                               std::size_t max_batch,
                                                               std::string* why_not) {
  const auto refuse = [&](std::string why) -> std::unique_ptr<TensorCoreAttention> {
    if (why_not != nullptr) *why_not = std::move(why);
    return nullptr;
  };
  if (!ctx.is_cuda()) return refuse("not on a GPU");
  if (ctx.precision() != DType::bf16 && ctx.precision() != DType::f16)
    return refuse("cuDNN's attention runs 16-bit tensors: --precision bf16 or fp16");
  if (heads == 0 || c % heads != 0 || max_batch == 0) return refuse("no heads or no batch");
  std::string why;
  auto graphs = detail::AttentionGraphs::build(
      detail::handles_of(ctx), shape_of(max_batch, t, c, heads, ctx.precision()), &why);
  if (!graphs) return refuse("cuDNN: " + why);
  std::unique_ptr<TensorCoreAttention> a(new TensorCoreAttention(ctx, t, c, heads, max_batch));
  const DType d = ctx.precision();
  const Device dev = ctx.device();
  const std::size_t rows = max_batch * t;
  a->qkv16_ = Tensor::empty({rows * 3 * c}, d, dev);
  a->o16_ = Tensor::empty({rows * c}, d, dev);
  a->d_o16_ = Tensor::empty({rows * c}, d, dev);
  a->d_qkv16_ = Tensor::empty({rows * 3 * c}, d, dev);
  a->grow_workspace(graphs->workspace_bytes());
  auto e = std::make_unique<Entry>();
  e->batch = max_batch;
  e->graphs = std::move(graphs);
  a->entries_.push_back(std::move(e));
  return a;
}

void TensorCoreAttention::grow_workspace(std::size_t bytes) {
  if (bytes <= workspace_.numel() * sizeof(float)) return;
  // A later batch size's first call: earlier launches may read the old one.
  if (workspace_.numel() > 0) detail::gpu_stream_synchronize(detail::handles_of(ctx_).stream);
  workspace_ =
      Tensor::empty({(bytes + sizeof(float) - 1) / sizeof(float)}, DType::f32, ctx_.device());
  detail::note_graph_buffers_moved();
}

TensorCoreAttention::Entry& TensorCoreAttention::entry(std::size_t batch) {
  RT_CHECK(batch >= 1 && batch <= max_batch_,
           "attention on tensor cores: batch {} outside the 1..{} it was built for", batch,
           max_batch_);
  for (const auto& e : entries_)
    if (e->batch == batch) return *e;
  // Another batch size (the last, smaller evaluation batch): its graphs are
  // built on its first call (host-blocking, once).
  std::string why;
  auto graphs = detail::AttentionGraphs::build(
      detail::handles_of(ctx_), shape_of(batch, t_, c_, heads_, ctx_.precision()), &why);
  RT_CHECK(graphs != nullptr,
           "attention on tensor cores: cuDNN has no engine for batch {} (it had one for {}): {}",
           batch, max_batch_, why);
  grow_workspace(graphs->workspace_bytes());
  auto e = std::make_unique<Entry>();
  e->batch = batch;
  e->graphs = std::move(graphs);
  entries_.push_back(std::move(e));
  return *entries_.back();
}

void TensorCoreAttention::forward(std::size_t batch, const float* qkv, float* o, float* stats) {
  const detail::GpuHandles& h = detail::handles_of(ctx_);
  Entry& e = entry(batch);
  const std::size_t rows = batch * t_;
  const DType d = ctx_.precision();
  detail::gpu_to_precision_bits(h.stream, bits(qkv16_), qkv, rows * 3 * c_, d);
  e.graphs->forward(h, qkv16_.data(), o16_.data(), stats, workspace_.data());
  if (o != nullptr) detail::gpu_from_precision_bits(h.stream, o, bits(o16_), rows * c_, d);
}

void TensorCoreAttention::forward_stored(std::size_t batch, float* stats) {
  const detail::GpuHandles& h = detail::handles_of(ctx_);
  Entry& e = entry(batch);
  e.graphs->forward(h, qkv16_.data(), o16_.data(), stats, workspace_.data());
}

void TensorCoreAttention::backward_stored(std::size_t batch, const float* stats) {
  const detail::GpuHandles& h = detail::handles_of(ctx_);
  Entry& e = entry(batch);
  e.graphs->backward(h, qkv16_.data(), o16_.data(), d_o16_.data(), stats, d_qkv16_.data(),
                     workspace_.data());
}

void TensorCoreAttention::backward(std::size_t batch, const float* d_o, const float* stats,
                                   float* d_qkv) {
  const detail::GpuHandles& h = detail::handles_of(ctx_);
  Entry& e = entry(batch);
  const std::size_t rows = batch * t_;
  const DType d = ctx_.precision();
  detail::gpu_to_precision_bits(h.stream, bits(d_o16_), d_o, rows * c_, d);
  e.graphs->backward(h, qkv16_.data(), o16_.data(), d_o16_.data(), stats, d_qkv16_.data(),
                     workspace_.data());
  if (d_qkv != nullptr)
    detail::gpu_from_precision_bits(h.stream, d_qkv, bits(d_qkv16_), rows * 3 * c_, d);
}

BufferView TensorCoreAttention::o16(std::size_t batch) const {
  return o16_.buffer().slice(0, batch * t_ * c_);
}

BufferView TensorCoreAttention::qkv16(std::size_t batch) const {
  return qkv16_.buffer().slice(0, batch * t_ * 3 * c_);
}

BufferView TensorCoreAttention::d_o16(std::size_t batch) const {
  return d_o16_.buffer().slice(0, batch * t_ * c_);
}

BufferView TensorCoreAttention::d_qkv16(std::size_t batch) const {
  return d_qkv16_.buffer().slice(0, batch * t_ * 3 * c_);
}

std::string TensorCoreAttention::describe() const {
  std::string out;
  for (const auto& e : entries_)
    out += fmt::format("{}batch {}: {}", out.empty() ? "" : " | ", e->batch, e->graphs->engine());
  return out;
}

}  // namespace ringtrain
