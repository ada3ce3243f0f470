// The graphs of ops/cudnn_graph.h through cudnn-frontend (the only file that
// includes it). Each attempt follows the frontend's sequence: validate, the
// operation graph, execution plans from heuristics mode A then the fallback
// list, nondeterministic engines deselected (a step, and a resumed one, must
// repeat bit for bit; SDPA's backward by its deterministic attribute) and
// those wanting more than 2 GiB of workspace, check_support on this device,
// and the first plan that builds (the heuristics' best), or for the
// convolutions' candidates the first few that build, each run by its plan
// index. Any failure is a reason, not an Error: the caller keeps its own path.
#include <cudnn.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include <cudnn_frontend.h>
#include <fmt/format.h>

#include "ops/cudnn_graph.h"
#include "ops/gpu_ops.h"
#include "ringtrain/core/check.h"

namespace ringtrain::detail {

namespace {

namespace fe = cudnn_frontend;
using TensorPtr = std::shared_ptr<fe::graph::Tensor_attributes>;
using Dims = std::vector<std::int64_t>;

std::int64_t i64(std::size_t v) {
  return static_cast<std::int64_t>(v);
}

fe::DataType_t data_type(DType t) {
  switch (t) {
    case DType::bf16:
      return fe::DataType_t::BFLOAT16;
    case DType::f16:
      return fe::DataType_t::HALF;
    case DType::f32:
      return fe::DataType_t::FLOAT;
    default:
      break;
  }
  RT_CHECK(false, "cuDNN graph: no cuDNN data type for {}", dtype_name(t));
  return fe::DataType_t::NOT_SET;
}

cudnnHandle_t dnn_of(const GpuHandles& h) {
  return static_cast<cudnnHandle_t>(h.dnn);
}

// [N, C, H, W]'s strides in NCHW or NHWC memory order.
Dims image_strides(std::size_t c, std::size_t h, std::size_t w, bool nhwc) {
  if (nhwc) return {i64(h * w * c), 1, i64(w * c), i64(c)};
  return {i64(c * h * w), i64(h * w), i64(w), 1};
}

// The largest workspace an engine may ask for, as the legacy convolutions'
// cap (gpu_conv_plan.cpp): a larger one is deselected, so that the shared
// workspace's growth never fails a step where another engine would do.
constexpr std::int64_t kGraphWorkspaceCap = std::int64_t{2} << 30;

// How a graph's engines are kept deterministic: by cuDNN's numerical notes
// (engines noted NONDETERMINISTIC deselected), or by the operation's own
// attribute (SDPA's backward: set_deterministic_algorithm routes it to the
// dP-workspace kernels, and an engine-level note could bar every engine).
enum class Determinism { by_notes, by_attribute };

// A message's first line (the frontend lists every engine's failure:
// kilobytes in a layer's description).
std::string first_line(std::string message) {
  if (const std::size_t eol = message.find('\n'); eol != std::string::npos) {
    message.resize(eol);
    message += " (...)";
  }
  return message;
}

// The heuristics mode the convolutions' graphs ask (RINGTRAIN_CONV_HEUR=a, the
// default, or b: cuDNN's slower, model-based ranking), read once. An
// experiment's switch: round 7 found the weight gradient's first
// deterministic engine of mode A at about 30 times its forward's time
// (resnet50's layer1 on an H200), and mode B may rank another first.
fe::HeurMode_t conv_heuristics_mode() {
  static const fe::HeurMode_t mode = [] {
    const char* env = std::getenv("RINGTRAIN_CONV_HEUR");
    const std::string v = env == nullptr ? "a" : env;
    RT_CHECK(v == "a" || v == "b", "RINGTRAIN_CONV_HEUR={}: expected a or b", v);
    return v == "b" ? fe::HeurMode_t::B : fe::HeurMode_t::A;
  }();
  return mode;
}

// The frontend's build sequence; "" when the graph is built, else the step
// that failed and the first line of cuDNN's message. With `built`: up to that many of the
// qualifying engines are built, in the heuristics' order, and their plan indices listed, for the
// caller to choose among; without `built`: the first that builds (HEURISTICS_CHOICE), which the
// graph then executes.
}  // namespace

const char* conv_heuristics_mode_name() {
  return conv_heuristics_mode() == fe::HeurMode_t::B ? "heuristics B" : "heuristics A";
}

namespace {

std::string build_steps(fe::graph::Graph& g, cudnnHandle_t dnn, Determinism determinism,
                        fe::HeurMode_t mode, const EngineWanted& wanted,
                        std::vector<std::int64_t>* built) {
  const auto failed = [](const char* step, fe::error_t e) {
    return fmt::format("{}: {}", step, first_line(e.get_message()));
  };
  if (fe::error_t e = g.validate(); e.is_bad()) return failed("validate", e);
  if (fe::error_t e = g.build_operation_graph(dnn); e.is_bad()) return failed("operation graph", e);
  if (fe::error_t e = g.create_execution_plans({mode, fe::HeurMode_t::FALLBACK}); e.is_bad())
    return failed("heuristics", e);
  if (determinism == Determinism::by_notes)
    g.deselect_numeric_notes({fe::NumericalNote_t::NONDETERMINISTIC});
  // The convolutions (the graphs built by candidates): no engine that
  // down-converts its inputs or reduces in reduced precision, timed or not.
  // The faster engines are often those, and the numbers must not depend on
  // which engine timed fastest, nor differ between a timed and an untimed
  // run in more than the order of an fp32 sum.
  if (built != nullptr)
    g.deselect_numeric_notes({fe::NumericalNote_t::DOWN_CONVERT_INPUTS,
                              fe::NumericalNote_t::REDUCED_PRECISION_REDUCTION});
  g.deselect_workspace_greater_than(kGraphWorkspaceCap);
  if (fe::error_t e = g.check_support(dnn); e.is_bad())
    return failed(built != nullptr ? "no deterministic, full-precision engine (no reduced-"
                                     "precision reduction or down-converted inputs) within the "
                                     "workspace cap supports it"
                  : determinism == Determinism::by_notes
                      ? "no deterministic engine within the workspace cap supports it"
                      : "no engine within the workspace cap supports it",
                  e);
  if (built == nullptr) {
    if (fe::error_t e = g.build_plans(dnn, fe::BuildPlanPolicy_t::HEURISTICS_CHOICE); e.is_bad())
      return failed("plan", e);
    return {};
  }
  // A deselected engine (a note, the workspace cap) or one that fails to
  // build is passed over, as HEURISTICS_CHOICE passes it over.
  std::string first_failure;
  built->clear();
  const std::size_t most = std::max<std::size_t>(wanted.most, 1);
  for (std::int64_t i = 0; i < g.get_execution_plan_count() && built->size() < most; ++i) {
    // The name is the engine config's (known before a plan is built).
    std::string name;
    if (!wanted.only.empty() && (g.get_plan_name_at_index(i, name).is_bad() || name != wanted.only))
      continue;
    if (fe::error_t e = g.build_plan_at_index(dnn, i); e.is_bad()) {
      if (first_failure.empty()) first_failure = first_line(e.get_message());
      continue;
    }
    built->push_back(i);
  }
  if (built->empty())
    return wanted.only.empty() || !first_failure.empty() ? "plan: " + first_failure
                                                         : "no engine named " + wanted.only;
  return {};
}

// The frontend reports most failures as a status, some by throwing: both are
// a reason here.
std::string build_graph(fe::graph::Graph& g, cudnnHandle_t dnn,
                        Determinism determinism = Determinism::by_notes,
                        fe::HeurMode_t mode = fe::HeurMode_t::A, const EngineWanted& wanted = {},
                        std::vector<std::int64_t>* built = nullptr) {
  try {
    return build_steps(g, dnn, determinism, mode, wanted, built);
  } catch (const std::exception& e) {
    return "cudnn-frontend threw: " + first_line(e.what());
  }
}

std::size_t workspace_of(const fe::graph::Graph& g) {
  std::int64_t bytes = 0;
  const fe::error_t e = g.get_workspace_size(bytes);
  RT_CHECK(e.is_good(), "cuDNN graph: workspace size: {}", fe::error_t(e).get_message());
  return static_cast<std::size_t>(bytes);
}

std::string plan_name(const fe::graph::Graph& g) {
  std::string name;
  if (g.get_plan_name(name).is_bad()) return "(unnamed engine)";
  return name;
}

void execute(const fe::graph::Graph& g, const GpuHandles& h,
             std::unordered_map<TensorPtr, void*>& pack, void* workspace, const char* what) {
  const fe::error_t e = g.execute(dnn_of(h), pack, workspace);
  RT_CHECK(e.is_good(), "cuDNN graph ({}): execute: {}", what, fe::error_t(e).get_message());
}

// One built engine of a graph that may hold several (the convolutions'
// candidates share their graph): its plan index, workspace and name.
class BuiltPlan {
 public:
  BuiltPlan(std::shared_ptr<fe::graph::Graph> g, std::int64_t index)
      : g_(std::move(g)), index_(index) {
    std::int64_t bytes = 0;
    const fe::error_t e = g_->get_workspace_size_plan_at_index(index_, bytes);
    RT_CHECK(e.is_good(), "cuDNN graph: workspace size: {}", fe::error_t(e).get_message());
    workspace_ = static_cast<std::size_t>(bytes);
    if (g_->get_plan_name_at_index(index_, name_).is_bad()) name_ = "(unnamed engine)";
  }
  std::size_t workspace() const { return workspace_; }
  const std::string& name() const { return name_; }
  void execute(const GpuHandles& h, std::unordered_map<TensorPtr, void*>& pack, void* workspace,
               const char* what) const {
    const fe::error_t e = g_->execute_plan_at_index(dnn_of(h), pack, workspace, index_);
    RT_CHECK(e.is_good(), "cuDNN graph ({}, {}): execute: {}", what, name_,
             fe::error_t(e).get_message());
  }

 private:
  std::shared_ptr<fe::graph::Graph> g_;
  std::int64_t index_;
  std::size_t workspace_ = 0;
  std::string name_;
};

class FrontendConvWgrad final : public ConvWgradGraph {
 public:
  FrontendConvWgrad(BuiltPlan plan, TensorPtr x, TensorPtr dy, TensorPtr dw, bool kcrs,
                    DType dw_dtype)
      : plan_(std::move(plan)),
        x_(std::move(x)),
        dy_(std::move(dy)),
        dw_(std::move(dw)),
        kcrs_(kcrs),
        dw_dtype_(dw_dtype) {}
  bool writes_kcrs() const override { return kcrs_; }
  DType dw_dtype() const override { return dw_dtype_; }
  std::size_t workspace_bytes() const override { return plan_.workspace(); }
  void run(const GpuHandles& h, const void* x, const void* dy, void* dw,
           void* workspace) const override {
    std::unordered_map<TensorPtr, void*> pack = {
        {x_, const_cast<void*>(x)}, {dy_, const_cast<void*>(dy)}, {dw_, dw}};
    plan_.execute(h, pack, workspace, "convolution weight gradient");
  }
  std::string engine() const override { return plan_.name(); }

 private:
  BuiltPlan plan_;
  TensorPtr x_, dy_, dw_;
  bool kcrs_;
  DType dw_dtype_;
};

}  // namespace

std::vector<std::unique_ptr<ConvWgradGraph>> ConvWgradGraph::candidates(const GpuHandles& h,
                                                                        const ConvGraphShape& s,
                                                                        DType dw_dtype,
                                                                        const EngineWanted& wanted,
                                                                        std::string* why_not) {
  RT_CHECK(dw_dtype == DType::f32 || dw_dtype == s.dtype,
           "cuDNN graph: a weight gradient of {} from {} data", dtype_name(dw_dtype),
           dtype_name(s.dtype));
  std::vector<std::unique_ptr<ConvWgradGraph>> out;
  std::string reasons;
  // dW in the data's memory order first: the model's [K, C, R, S] for NCHW;
  // for channels-last data with a filter wider than 1x1, a channels-last
  // [K, R, S, C] dW that the caller transposes back (about 0.05 ms a
  // resnet50 step), as PyTorch's channels_last weight is, since an engine
  // that takes the mixed layouts may be a generic one; then [K, C, R, S].
  // (A 1x1 filter's two orders are the same memory.)
  const bool wide_filter = s.r * s.s > 1;
  const std::vector<bool> orders = !s.nhwc       ? std::vector<bool>{true}
                                   : wide_filter ? std::vector<bool>{false, true}
                                                 : std::vector<bool>{true, false};
  for (const bool kcrs : orders) {
    auto g = std::make_shared<fe::graph::Graph>();
    g->set_io_data_type(data_type(s.dtype))
        .set_intermediate_data_type(fe::DataType_t::FLOAT)
        .set_compute_data_type(fe::DataType_t::FLOAT);
    TensorPtr x = g->tensor(fe::graph::Tensor_attributes()
                                .set_name("x")
                                .set_dim({i64(s.n), i64(s.c), i64(s.h), i64(s.w)})
                                .set_stride(image_strides(s.c, s.h, s.w, s.nhwc)));
    TensorPtr dy = g->tensor(fe::graph::Tensor_attributes()
                                 .set_name("dy")
                                 .set_dim({i64(s.n), i64(s.k), i64(s.p), i64(s.q)})
                                 .set_stride(image_strides(s.k, s.p, s.q, s.nhwc)));
    TensorPtr dw = g->conv_wgrad(dy, x,
                                 fe::graph::Conv_wgrad_attributes()
                                     .set_name("wgrad")
                                     .set_padding({i64(s.pad_h), i64(s.pad_w)})
                                     .set_stride({i64(s.stride_h), i64(s.stride_w)})
                                     .set_dilation({1, 1}));
    dw->set_output(true)
        .set_dim({i64(s.k), i64(s.c), i64(s.r), i64(s.s)})
        .set_stride(image_strides(s.c, s.r, s.s, !kcrs))
        .set_data_type(data_type(dw_dtype));
    std::vector<std::int64_t> built;
    const std::string failed =
        build_graph(*g, dnn_of(h), Determinism::by_notes, conv_heuristics_mode(), wanted, &built);
    for (const std::int64_t index : built)
      out.push_back(
          std::make_unique<FrontendConvWgrad>(BuiltPlan(g, index), x, dy, dw, kcrs, dw_dtype));
    if (!failed.empty())
      reasons += fmt::format("{}{} dW {}: {}", reasons.empty() ? "" : "; ", dtype_name(dw_dtype),
                             kcrs ? "[K,C,R,S]" : "[K,R,S,C]", failed);
    // One engine wanted: the first order that has one.
    if (wanted.most <= 1 && wanted.only.empty() && !out.empty()) break;
  }
  if (out.empty() && why_not != nullptr) *why_not = reasons;
  return out;
}

std::unique_ptr<ConvWgradGraph> ConvWgradGraph::build(const GpuHandles& h, const ConvGraphShape& s,
                                                      std::string* why_not) {
  auto built = candidates(h, s, DType::f32, EngineWanted{}, why_not);
  if (built.empty()) return nullptr;
  return std::move(built.front());
}

namespace {

class FrontendConvData final : public ConvDataGraph {
 public:
  FrontendConvData(BuiltPlan plan, TensorPtr in, TensorPtr w, TensorPtr out, ConvDataOp op)
      : plan_(std::move(plan)),
        in_(std::move(in)),
        w_(std::move(w)),
        out_(std::move(out)),
        op_(op) {}
  std::size_t workspace_bytes() const override { return plan_.workspace(); }
  void run(const GpuHandles& h, const void* in, const void* w, void* out,
           void* workspace) const override {
    std::unordered_map<TensorPtr, void*> pack = {
        {in_, const_cast<void*>(in)}, {w_, const_cast<void*>(w)}, {out_, out}};
    plan_.execute(h, pack, workspace,
                  op_ == ConvDataOp::forward ? "convolution forward" : "convolution backward data");
  }
  std::string engine() const override { return plan_.name(); }

 private:
  BuiltPlan plan_;
  TensorPtr in_, w_, out_;
  ConvDataOp op_;
};

}  // namespace

std::vector<std::unique_ptr<ConvDataGraph>> ConvDataGraph::candidates(const GpuHandles& h,
                                                                      const ConvGraphShape& s,
                                                                      ConvDataOp op,
                                                                      const EngineWanted& wanted,
                                                                      std::string* why_not) {
  auto g = std::make_shared<fe::graph::Graph>();
  g->set_io_data_type(data_type(s.dtype))
      .set_intermediate_data_type(fe::DataType_t::FLOAT)
      .set_compute_data_type(fe::DataType_t::FLOAT);
  const Dims x_dims = {i64(s.n), i64(s.c), i64(s.h), i64(s.w)};
  const Dims y_dims = {i64(s.n), i64(s.k), i64(s.p), i64(s.q)};
  const Dims x_strides = image_strides(s.c, s.h, s.w, s.nhwc);
  const Dims y_strides = image_strides(s.k, s.p, s.q, s.nhwc);
  TensorPtr w = g->tensor(fe::graph::Tensor_attributes()
                              .set_name("w")
                              .set_dim({i64(s.k), i64(s.c), i64(s.r), i64(s.s)})
                              .set_stride(image_strides(s.c, s.r, s.s, s.nhwc)));
  const bool forward = op == ConvDataOp::forward;
  TensorPtr in = g->tensor(fe::graph::Tensor_attributes()
                               .set_name(forward ? "x" : "dy")
                               .set_dim(forward ? x_dims : y_dims)
                               .set_stride(forward ? x_strides : y_strides));
  const std::vector<std::int64_t> padding = {i64(s.pad_h), i64(s.pad_w)};
  const std::vector<std::int64_t> stride = {i64(s.stride_h), i64(s.stride_w)};
  TensorPtr out = forward ? g->conv_fprop(in, w,
                                          fe::graph::Conv_fprop_attributes()
                                              .set_name("fprop")
                                              .set_padding(padding)
                                              .set_stride(stride)
                                              .set_dilation({1, 1}))
                          : g->conv_dgrad(in, w,
                                          fe::graph::Conv_dgrad_attributes()
                                              .set_name("dgrad")
                                              .set_padding(padding)
                                              .set_stride(stride)
                                              .set_dilation({1, 1}));
  out->set_output(true)
      .set_dim(forward ? y_dims : x_dims)
      .set_stride(forward ? y_strides : x_strides);
  std::vector<std::int64_t> built;
  const std::string failed =
      build_graph(*g, dnn_of(h), Determinism::by_notes, conv_heuristics_mode(), wanted, &built);
  std::vector<std::unique_ptr<ConvDataGraph>> result;
  for (const std::int64_t index : built)
    result.push_back(std::make_unique<FrontendConvData>(BuiltPlan(g, index), in, w, out, op));
  if (result.empty() && why_not != nullptr) *why_not = failed;
  return result;
}

std::unique_ptr<ConvDataGraph> ConvDataGraph::build(const GpuHandles& h, const ConvGraphShape& s,
                                                    ConvDataOp op, std::string* why_not) {
  auto built = candidates(h, s, op, EngineWanted{}, why_not);
  if (built.empty()) return nullptr;
  return std::move(built.front());
}

namespace {

// Q, K, V of head h as [batch, heads, T, d] views of the fused qkv rows.
Dims qkv_strides(const AttentionShape& s) {
  const std::size_t d = s.c / s.heads;
  return {i64(s.t * 3 * s.c), i64(d), i64(3 * s.c), 1};
}
// O (and dO) [batch, T, C] as [batch, heads, T, d].
Dims o_strides(const AttentionShape& s) {
  const std::size_t d = s.c / s.heads;
  return {i64(s.t * s.c), i64(d), i64(s.c), 1};
}
// The row statistics [batch, heads, T, 1], fp32.
Dims stats_dims(const AttentionShape& s) {
  return {i64(s.batch), i64(s.heads), i64(s.t), 1};
}
Dims stats_strides(const AttentionShape& s) {
  return {i64(s.heads * s.t), i64(s.t), 1, 1};
}

TensorPtr head_tensor(fe::graph::Graph& g, const char* name, const AttentionShape& s,
                      const Dims& strides) {
  return g.tensor(fe::graph::Tensor_attributes()
                      .set_name(name)
                      .set_dim({i64(s.batch), i64(s.heads), i64(s.t), i64(s.c / s.heads)})
                      .set_stride(strides));
}

std::shared_ptr<fe::graph::Graph> new_graph(DType dtype) {
  auto g = std::make_shared<fe::graph::Graph>();
  g->set_io_data_type(data_type(dtype))
      .set_intermediate_data_type(fe::DataType_t::FLOAT)
      .set_compute_data_type(fe::DataType_t::FLOAT);
  return g;
}

class FrontendAttention final : public AttentionGraphs {
 public:
  explicit FrontendAttention(const AttentionShape& s) : s_(s) {
    scale_ = 1.0f / std::sqrt(static_cast<float>(s.c / s.heads));
  }

  // "" when both graphs are built.
  std::string build(cudnnHandle_t dnn) {
    fwd_ = new_graph(s_.dtype);
    q_ = head_tensor(*fwd_, "q", s_, qkv_strides(s_));
    k_ = head_tensor(*fwd_, "k", s_, qkv_strides(s_));
    v_ = head_tensor(*fwd_, "v", s_, qkv_strides(s_));
    const auto options = fe::graph::SDPA_attributes()
                             .set_name("causal_attention")
                             .set_generate_stats(true)
                             .set_causal_mask(true)
                             .set_attn_scale(scale_);
    auto [o, stats] = fwd_->sdpa(q_, k_, v_, options);
    o->set_output(true)
        .set_dim({i64(s_.batch), i64(s_.heads), i64(s_.t), i64(s_.c / s_.heads)})
        .set_stride(o_strides(s_));
    stats->set_output(true)
        .set_data_type(fe::DataType_t::FLOAT)
        .set_dim(stats_dims(s_))
        .set_stride(stats_strides(s_));
    o_ = o;
    stats_ = stats;
    if (std::string f = build_graph(*fwd_, dnn); !f.empty()) return "forward: " + f;

    bwd_ = new_graph(s_.dtype);
    bq_ = head_tensor(*bwd_, "q", s_, qkv_strides(s_));
    bk_ = head_tensor(*bwd_, "k", s_, qkv_strides(s_));
    bv_ = head_tensor(*bwd_, "v", s_, qkv_strides(s_));
    bo_ = head_tensor(*bwd_, "o", s_, o_strides(s_));
    bdo_ = head_tensor(*bwd_, "d_o", s_, o_strides(s_));
    bstats_ = bwd_->tensor(fe::graph::Tensor_attributes()
                               .set_name("stats")
                               .set_dim(stats_dims(s_))
                               .set_stride(stats_strides(s_))
                               .set_data_type(fe::DataType_t::FLOAT));
    const auto back = fe::graph::SDPA_backward_attributes()
                          .set_name("causal_attention_backward")
                          .set_causal_mask(true)
                          .set_attn_scale(scale_)
                          .set_deterministic_algorithm(true);
    auto [dq, dk, dv] = bwd_->sdpa_backward(bq_, bk_, bv_, bo_, bdo_, bstats_, back);
    for (const TensorPtr& t : {dq, dk, dv})
      t->set_output(true)
          .set_dim({i64(s_.batch), i64(s_.heads), i64(s_.t), i64(s_.c / s_.heads)})
          .set_stride(qkv_strides(s_));
    dq_ = dq;
    dk_ = dk;
    dv_ = dv;
    if (std::string f = build_graph(*bwd_, dnn, Determinism::by_attribute); !f.empty())
      return "backward: " + f;
    workspace_ = std::max(workspace_of(*fwd_), workspace_of(*bwd_));
    engine_ = fmt::format("cuDNN SDPA {} / {}", plan_name(*fwd_), plan_name(*bwd_));
    return {};
  }

  std::size_t workspace_bytes() const override { return workspace_; }

  void forward(const GpuHandles& h, const void* qkv, void* o, float* stats,
               void* workspace) const override {
    auto* base = static_cast<char*>(const_cast<void*>(qkv));
    const std::size_t col = s_.c * dtype_size(s_.dtype);
    std::unordered_map<TensorPtr, void*> pack = {
        {q_, base}, {k_, base + col}, {v_, base + 2 * col}, {o_, o}, {stats_, stats}};
    execute(*fwd_, h, pack, workspace, "attention forward");
  }

  void backward(const GpuHandles& h, const void* qkv, const void* o, const void* d_o,
                const float* stats, void* d_qkv, void* workspace) const override {
    auto* base = static_cast<char*>(const_cast<void*>(qkv));
    auto* dbase = static_cast<char*>(d_qkv);
    const std::size_t col = s_.c * dtype_size(s_.dtype);
    std::unordered_map<TensorPtr, void*> pack = {{bq_, base},
                                                 {bk_, base + col},
                                                 {bv_, base + 2 * col},
                                                 {bo_, const_cast<void*>(o)},
                                                 {bdo_, const_cast<void*>(d_o)},
                                                 {bstats_, const_cast<float*>(stats)},
                                                 {dq_, dbase},
                                                 {dk_, dbase + col},
                                                 {dv_, dbase + 2 * col}};
    execute(*bwd_, h, pack, workspace, "attention backward");
  }

  std::string engine() const override { return engine_; }

 private:
  AttentionShape s_;
  float scale_ = 1.0f;
  std::shared_ptr<fe::graph::Graph> fwd_, bwd_;
  TensorPtr q_, k_, v_, o_, stats_;
  TensorPtr bq_, bk_, bv_, bo_, bdo_, bstats_, dq_, dk_, dv_;
  std::size_t workspace_ = 0;
  std::string engine_;
};

}  // namespace

std::unique_ptr<AttentionGraphs> AttentionGraphs::build(const GpuHandles& h,
                                                        const AttentionShape& s,
                                                        std::string* why_not) {
  auto a = std::make_unique<FrontendAttention>(s);
  std::string failed;
  try {  // the frontend's graph calls may throw as well as return a status
    failed = a->build(dnn_of(h));
  } catch (const std::exception& e) {
    failed = "cudnn-frontend threw: " + first_line(e.what());
  }
  if (failed.empty()) return a;
  if (why_not != nullptr) *why_not = std::move(failed);
  return nullptr;
}

}  // namespace ringtrain::detail
