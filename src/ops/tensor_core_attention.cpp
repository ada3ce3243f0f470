#include "ops/tensor_core_attention.h"

#include <algorithm>
#include <cstdint>
#include <utility>

#include <fmt/format.h>

#include "core/stream_graph.h"
#include "ops/cudnn_graph.h"
#include "ops/gpu_ops.h"
#include "ringtrain/core/check.h"

namespace ringtrain {

struct TensorCoreAttention::Entry {
  std::size_t batch = 0;
  const detail::AttentionGraphs* graphs = nullptr;  // owned by Shared
};

struct TensorCoreAttention::Shared {
  struct Built {
    detail::AttentionShape shape;
    std::unique_ptr<detail::AttentionGraphs> graphs;  // null: refused, for `why`
    std::string why;
  };
  std::vector<Built> built;
  Tensor workspace, d_o16, d_qkv16;

  // The graphs of a shape, built on its first request (host-blocking, once
  // per context); null where cuDNN refuses it, *why_not saying why.
  const detail::AttentionGraphs* find_or_build(const ComputeContext& ctx,
                                               const detail::AttentionShape& shape,
                                               std::string* why_not) {
    for (const Built& b : built)
      if (same(b.shape, shape)) {
        if (why_not != nullptr) *why_not = b.why;
        return b.graphs.get();
      }
    Built b{shape, nullptr, {}};
    b.graphs = detail::AttentionGraphs::build(detail::handles_of(ctx), shape, &b.why);
    if (b.graphs) grow(ctx, workspace, DType::f32, b.graphs->workspace_bytes() / sizeof(float) + 1);
    if (why_not != nullptr) *why_not = b.why;
    built.push_back(std::move(b));
    return built.back().graphs.get();
  }

  // Grows a shared buffer to `count` elements. A grown buffer is a new
  // address: earlier launches may still read the old one, and a captured step
  // must be captured again.
  static void grow(const ComputeContext& ctx, Tensor& t, DType d, std::size_t count) {
    if (count <= t.numel()) return;
    if (t.numel() > 0) detail::gpu_stream_synchronize(detail::handles_of(ctx).stream);
    t = Tensor::empty({count}, d, ctx.device());
    detail::note_graph_buffers_moved();
  }

  static bool same(const detail::AttentionShape& a, const detail::AttentionShape& b) {
    return a.batch == b.batch && a.t == b.t && a.c == b.c && a.heads == b.heads &&
           a.dtype == b.dtype;
  }
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
                                         std::size_t heads, std::size_t max_batch,
                                         std::shared_ptr<Shared> shared)
    : ctx_(ctx), t_(t), c_(c), heads_(heads), max_batch_(max_batch), shared_(std::move(shared)) {}

TensorCoreAttention::~TensorCoreAttention() = default;

// One Shared per context, kept by the context (GpuHandles::attention), so
// that a shape cuDNN refused is built once however many layers ask. A
// context's layers run on one thread, as its stream orders them: Shared
// takes no lock.
std::shared_ptr<TensorCoreAttention::Shared> TensorCoreAttention::shared_of(
    const ComputeContext& ctx) {
  std::shared_ptr<void>& slot = *detail::handles_of(ctx).attention;
  if (slot == nullptr) slot = std::make_shared<Shared>();
  return std::static_pointer_cast<Shared>(slot);
}

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
  std::shared_ptr<Shared> shared = shared_of(ctx);
  std::string why;
  const detail::AttentionGraphs* graphs =
      shared->find_or_build(ctx, shape_of(max_batch, t, c, heads, ctx.precision()), &why);
  if (graphs == nullptr) return refuse("cuDNN: " + why);
  const DType d = ctx.precision();
  const std::size_t rows = max_batch * t;
  Shared::grow(ctx, shared->d_o16, d, rows * c);
  Shared::grow(ctx, shared->d_qkv16, d, rows * 3 * c);
  std::unique_ptr<TensorCoreAttention> a(
      new TensorCoreAttention(ctx, t, c, heads, max_batch, std::move(shared)));
  a->qkv16_ = Tensor::empty({rows * 3 * c}, d, ctx.device());
  a->o16_ = Tensor::empty({rows * c}, d, ctx.device());
  a->entries_.push_back(Entry{max_batch, graphs});
  return a;
}

const detail::AttentionGraphs& TensorCoreAttention::graphs(std::size_t batch) {
  RT_CHECK(batch >= 1 && batch <= max_batch_,
           "attention on tensor cores: batch {} outside the 1..{} it was built for", batch,
           max_batch_);
  for (const Entry& e : entries_)
    if (e.batch == batch) return *e.graphs;
  // Another batch size (the last, smaller evaluation batch): its graphs are
  // built on the context's first call for it (host-blocking, once).
  std::string why;
  const detail::AttentionGraphs* g =
      shared_->find_or_build(ctx_, shape_of(batch, t_, c_, heads_, ctx_.precision()), &why);
  RT_CHECK(g != nullptr,
           "attention on tensor cores: cuDNN has no engine for batch {} (it had one for {}): {}",
           batch, max_batch_, why);
  entries_.push_back(Entry{batch, g});
  return *g;
}

void TensorCoreAttention::forward(std::size_t batch, const float* qkv, float* o, float* stats) {
  const detail::GpuHandles& h = detail::handles_of(ctx_);
  const detail::AttentionGraphs& g = graphs(batch);
  const std::size_t rows = batch * t_;
  const DType d = ctx_.precision();
  detail::gpu_to_precision_bits(h.stream, bits(qkv16_), qkv, rows * 3 * c_, d);
  g.forward(h, qkv16_.data(), o16_.data(), stats, shared_->workspace.data());
  if (o != nullptr) detail::gpu_from_precision_bits(h.stream, o, bits(o16_), rows * c_, d);
}

void TensorCoreAttention::forward_stored(std::size_t batch, float* stats) {
  const detail::GpuHandles& h = detail::handles_of(ctx_);
  graphs(batch).forward(h, qkv16_.data(), o16_.data(), stats, shared_->workspace.data());
}

void TensorCoreAttention::backward_stored(std::size_t batch, const float* stats) {
  const detail::GpuHandles& h = detail::handles_of(ctx_);
  graphs(batch).backward(h, qkv16_.data(), o16_.data(), shared_->d_o16.data(), stats,
                         shared_->d_qkv16.data(), shared_->workspace.data());
}

void TensorCoreAttention::backward(std::size_t batch, const float* d_o, const float* stats,
                                   float* d_qkv) {
  const detail::GpuHandles& h = detail::handles_of(ctx_);
  const detail::AttentionGraphs& g = graphs(batch);
  const std::size_t rows = batch * t_;
  const DType d = ctx_.precision();
  detail::gpu_to_precision_bits(h.stream, bits(shared_->d_o16), d_o, rows * c_, d);
  g.backward(h, qkv16_.data(), o16_.data(), shared_->d_o16.data(), stats, shared_->d_qkv16.data(),
             shared_->workspace.data());
  if (d_qkv != nullptr)
    detail::gpu_from_precision_bits(h.stream, d_qkv, bits(shared_->d_qkv16), rows * 3 * c_, d);
}

BufferView TensorCoreAttention::o16(std::size_t batch) const {
  return o16_.buffer().slice(0, batch * t_ * c_);
}

BufferView TensorCoreAttention::qkv16(std::size_t batch) const {
  return qkv16_.buffer().slice(0, batch * t_ * 3 * c_);
}

BufferView TensorCoreAttention::d_o16(std::size_t batch) const {
  return shared_->d_o16.buffer().slice(0, batch * t_ * c_);
}

BufferView TensorCoreAttention::d_qkv16(std::size_t batch) const {
  return shared_->d_qkv16.buffer().slice(0, batch * t_ * 3 * c_);
}

std::string TensorCoreAttention::describe() const {
  std::string out;
  for (const Entry& e : entries_)
    out += fmt::format("{}batch {}: {}", out.empty() ? "" : " | ", e.batch, e.graphs->engine());
  return out;
}

}  // namespace ringtrain
