// Conv2d on a GPU through cuDNN, planned per batch size.
//
// The plan keeps one entry per batch size it has seen: the x and y tensor
// descriptors and, for each of forward, backward filter and backward data,
// the algorithm and math type that cuDNN's heuristics rank best among those
// the rules allow (ops/conv_algo_choice.h). The workspace is the context's,
// shared by its convolutions, and so is their filter-sized fp32 scratch.
// (The Find path below, kMeasureAlgorithms, measures instead; it is off: see
// the constant. Where the text says "measured", read "asked" while it is.)
//
// - At plan time, the entry for the maximum batch is measured with
//   cudnnFind*AlgorithmEx on scratch x, y and w buffers of that batch and a
//   trial workspace of up to kWorkspaceCap (all freed at the end of the
//   constructor). The workspace is then allocated for the largest need among
//   what a step will run (stored_workspace_need: under bf16/fp16, the 16-bit
//   engines, not the fp32 algorithms chosen beside them); an algorithm that
//   needs more grows it on its first run.
// - A call looks its batch up (a scan of a handful of entries) and launches:
//   no cuDNN query, no allocation, nothing that blocks the host, once the
//   shape has run (a first call may grow the shared workspace or scratch:
//   on the eager step, before any CUDA graph captures it).
// - Another batch size (the smaller last evaluation batch) gets its entry on
//   the first call with that size, per operation. By the heuristics, the
//   choice is made within the trial size, as at plan time, and the workspace
//   grown to fit it: it depends on the shape and the GPU, not on what earlier
//   calls left in the workspace. (Measuring, Find runs on the call's own
//   buffers, outputs that the call overwrites anyway, and a weight-sized
//   scratch for backward filter, so accumulated weight gradients are
//   untouched, within the existing workspace, and only if no algorithm fits
//   it, again with a trial workspace.)
//
// Rules: status success, workspace within the limit, and deterministic
// algorithms only (kDeterministicOnly), so that two runs of one job, or a run
// and its resumption, give the same bits (cuDNN's nondeterministic ones use
// atomics: backward filter ALGO_0 and ALGO_3, backward data ALGO_0). Math:
// Find runs on a descriptor with CUDNN_FMA_MATH when TF32 is off, and with
// CUDNN_DEFAULT_MATH (TF32 allowed on Ampere and later) when it is on, as
// PyTorch does; a chosen result then runs with the math type it was measured
// with (one convolution descriptor per math type), and results that would
// down-convert to half are never taken.
//
// Channels-last (Conv2dGeometry::layout NHWC): x and y are NHWC descriptors,
// and so is the filter. cuDNN accepts an NCHW filter with NHWC data, but its
// NHWC tensor-core kernels (implicit GEMM over C) are for an NHWC filter
// ([K, R, S, C]); PyTorch's channels_last makes the weight channels-last too.
// The model's weight stays [K, C, R, S] (checkpoints, the optimizer), so a
// [K, R, S, C] copy (in the context's filter scratch) is transposed from the
// weight at each forward and backward-data call (one small kernel: the weight, not the
// activations), as the low-precision weight copy is refreshed at each forward; backward filter
// writes a [K, R, S, C] gradient that is transposed back into dw.
//
// --precision bf16|fp16 (the context's precision): the stored path's forward
// and backward data read and write the model's 16-bit buffers and the plan's
// own 16-bit filter copy, on tensor cores with fp32 accumulation. Their
// engines come from cuDNN's graph API (ops/cudnn_graph.h: heuristics mode A,
// then the fallback list, nondeterministic engines deselected), as PyTorch's
// v8 path chooses them; where the graph API has no engine for a shape (or
// RINGTRAIN_CONV_API=legacy), the legacy API's 16-bit descriptors run the
// algorithm its heuristics rank best under the rules above, with tensor-core
// math. The fp32 interface of a 16-bit context (a layer called with fp32
// buffers holding grid values) runs the fp32 path with TF32 allowed, which is
// exact on grid values, and rounds its y (or dx) to the grid: the same
// numbers. The CPU rounds y (before a bias) and dx at the same points
// (ops/conv2d.cpp).
// Backward filter of the stored (16-bit) path runs through cuDNN's graph API
// (ops/cudnn_graph.h): 16-bit x and dy on tensor cores, an fp32 dW, because
// cuDNN's legacy API writes dw in its inputs' data type and the policy keeps
// weight gradients fp32 (docs/precision.md). Where the graph API has no
// deterministic engine for a shape, x and dy are widened into the context's
// scratch and backward filter runs on the fp32 path above (TF32 per --tf32).
// The graphs are the context's (ConvGraphCache): one build per shape,
// however many layers share it.
#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "core/cuda/check_cuda.h"
#include "core/cuda/check_cudnn.h"
#include "core/stream_graph.h"
#include "kernels/precision.cuh"
#include "kernels/trial_pattern.h"
#include "ops/conv_algo_choice.h"
#include "ops/conv_engine_record.h"
#include "ops/cuda/engine_timing.h"
#include "ops/cuda/gpu_gemm_wgrad.h"
#include "ops/cudnn_graph.h"
#include "ops/gpu_ops.h"
#include "ops/wgrad_spot_check.h"
#include "ringtrain/core/check.h"
#include "ringtrain/core/log.h"
#include "tensor/cuda_memory.h"

namespace ringtrain::detail {

namespace {
// cuDNN's heuristics choose the algorithms, as PyTorch does by default
// (torch.backends.cudnn.benchmark = False): a choice by measurement (Find)
// follows timing noise, and on an H100 the same run twice picked different
// algorithms, so its parameters differed after 20 steps (each algorithm is
// deterministic; the choice was not). Bit-for-bit repeatable and resumable
// runs need a choice that depends on the shape and the GPU alone.
constexpr bool kMeasureAlgorithms = false;

// ResNet-50's deterministic backward-filter algorithms at batch 256 ask for up
// to about 1.2 GiB (an H200, 2026-11-26); the workspace is shared by every
// convolution of a context, so a large cap costs one buffer, not one per layer.
constexpr std::size_t kWorkspaceCap = std::size_t{2} << 30;
constexpr std::size_t kMinTrialWorkspace = std::size_t{1} << 20;
// fit_choice's warning, once a process.
std::atomic<bool> low_workspace_warned{false};
// Only CUDNN_DETERMINISTIC algorithms (PyTorch's cudnn.deterministic = True):
// repeatable runs, for little speed on these layers.
constexpr bool kDeterministicOnly = true;

ConvAlgoMath math_of(cudnnMathType_t m) {
  switch (m) {
    case CUDNN_FMA_MATH:
      return ConvAlgoMath::fma;
    case CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION:
      return ConvAlgoMath::tensor_down_conversion;
    case CUDNN_DEFAULT_MATH:
    case CUDNN_TENSOR_OP_MATH:
      break;
  }
  return ConvAlgoMath::tensor;
}

// Device memory owned by the plan: the workspace, Find's scratch buffers.
class DeviceBytes {
 public:
  DeviceBytes() = default;
  explicit DeviceBytes(std::size_t bytes) : bytes_(bytes) {
    if (bytes > 0) {
      RT_CUDA_CHECK(cudaMalloc(&ptr_, bytes));
      note_device_allocated(bytes);  // device_memory_use
    }
  }
  // As much as possible of `bytes`, halving on out-of-memory down to `floor`
  // (then nothing). The failed attempts' error is cleared, so that a later
  // launch check does not report it.
  static DeviceBytes up_to(std::size_t bytes, std::size_t floor) {
    DeviceBytes d;
    for (; bytes >= floor && bytes > 0; bytes /= 2) {
      const cudaError_t e = cudaMalloc(&d.ptr_, bytes);
      if (e == cudaSuccess) {
        d.bytes_ = bytes;
        note_device_allocated(bytes);
        return d;
      }
      d.ptr_ = nullptr;
      (void)cudaGetLastError();
      RT_CHECK(e == cudaErrorMemoryAllocation, "cudaMalloc of {} bytes for cuDNN's Find: {}", bytes,
               cudaGetErrorString(e));
    }
    return d;
  }
  // The workspace an algorithm choice may assume. Find (kMeasureAlgorithms)
  // runs in it: real memory, as much of kWorkspaceCap as cudaMalloc gives.
  // The heuristics read no memory, so a size alone: no transient gigabytes
  // per plan at build time, which would also stand in the peak that bench
  // step reports. Always kWorkspaceCap, never what happens to be free: the
  // choice (and whether a layer runs on the stored 16-bit path) must not
  // differ between two runs, or two ranks, with other tenants on the GPU. A
  // chosen workspace that does not fit fails with a message instead.
  static DeviceBytes trial_workspace() {
    if (kMeasureAlgorithms) return up_to(kWorkspaceCap, kMinTrialWorkspace);
    return size_only(kWorkspaceCap);
  }
  // A size and no memory: the limit the heuristics choose within.
  static DeviceBytes size_only(std::size_t bytes) {
    DeviceBytes d;
    d.bytes_ = bytes;
    return d;
  }
  ~DeviceBytes() { release(); }
  DeviceBytes(DeviceBytes&& o) noexcept
      : ptr_(std::exchange(o.ptr_, nullptr)), bytes_(std::exchange(o.bytes_, 0)) {}
  DeviceBytes& operator=(DeviceBytes&& o) noexcept {
    if (this != &o) {
      release();
      ptr_ = std::exchange(o.ptr_, nullptr);
      bytes_ = std::exchange(o.bytes_, 0);
    }
    return *this;
  }
  DeviceBytes(const DeviceBytes&) = delete;
  DeviceBytes& operator=(const DeviceBytes&) = delete;

  void* get() const { return ptr_; }
  std::size_t size() const { return bytes_; }

 private:
  void release() noexcept {
    if (ptr_ == nullptr) return;
    (void)cudaFree(ptr_);
    note_device_freed(bytes_);
    ptr_ = nullptr;
  }
  void* ptr_ = nullptr;
  std::size_t bytes_ = 0;
};

struct Choice {
  int algo = 0;
  cudnnMathType_t math = CUDNN_FMA_MATH;
  std::size_t memory = 0;
  // cuDNN's better-ranked algorithms that the rules passed over, and why
  // (bench step --layers shows it: what determinism costs a layer).
  std::string passed_over;
  // How it was chosen where not by the heuristics alone (timed, remembered).
  std::string how;
};

// The fp32 path's algorithms chosen by time at a plan's maximum batch, as
// the graph engines are (ConvGraphCache::choose): the first kCandidatesTimed
// algorithms the rules allow, in cuDNN's heuristic order, each run on fp32
// trial operands of the shape, and the choice remembered by shape, math and
// operation. Allocated on the first operation that times, freed with the
// plan's making.
struct LegacyTrial {
  std::size_t x_bytes = 0, y_bytes = 0, w_bytes = 0;
  DeviceBytes x, y, w, dw;
  void* stream = nullptr;
  std::string key;  // the shape's record key, less the operation

  // False where the GPU has no room for them: the heuristics' choice stands.
  bool ready() {
    if (x.size() > 0) return true;
    x = DeviceBytes::up_to(x_bytes, x_bytes);
    y = DeviceBytes::up_to(y_bytes, y_bytes);
    w = DeviceBytes::up_to(w_bytes, w_bytes);
    dw = DeviceBytes::up_to(w_bytes, w_bytes);
    if (x.size() < x_bytes || y.size() < y_bytes || w.size() < w_bytes || dw.size() < w_bytes) {
      x = DeviceBytes(), y = DeviceBytes(), w = DeviceBytes(), dw = DeviceBytes();
      return false;
    }
    // 0x3C3C3C3C is about 0.0115: finite sums.
    const auto s = static_cast<cudaStream_t>(stream);
    for (const DeviceBytes* b : {&x, &y, &w})
      RT_CUDA_CHECK(cudaMemsetAsync(b->get(), 0x3C, b->size(), s));
    return true;
  }
};

struct Entry {
  std::size_t batch = 0;
  cudnnTensorDescriptor_t x = nullptr, y = nullptr;
  std::optional<Choice> fwd, bwd_filter, bwd_data;
  // --precision bf16|fp16: the 16-bit x and y, and the 16-bit algorithms.
  cudnnTensorDescriptor_t x16 = nullptr, y16 = nullptr;
  std::optional<Choice> fwd16, bwd_data16;
  // The stored path's weight gradient on tensor cores (cuDNN's graph API:
  // 16-bit x and dy, fp32 dW), once tried; null: the widening path, and
  // wgrad16_why says why.
  std::shared_ptr<ConvWgradGraph> wgrad16;
  bool wgrad16_tried = false;
  std::string wgrad16_why;
  // The stored path's forward and backward data through the graph API, once
  // tried; null: the legacy algorithms above, and data16_why says why.
  std::shared_ptr<ConvDataGraph> fwd_graph, dgrad_graph;
  bool data16_tried = false;
  std::string data16_why;
  // How each graph's engine was chosen (ConvGraphCache::choose), for
  // bench step --layers: timed against the others, remembered, or the
  // heuristics' first.
  std::string wgrad16_how, fwd_how, dgrad_how;
};

// The operands a plan times its candidate engines on (ConvGraphCache::
// choose), at its maximum batch: 16-bit x and y (dy) filled with a finite
// pattern (the engines' speed does not depend on the values; zeros might
// flatter them), an fp32-sized dW, the plan's own 16-bit filter copy (its
// contents uninitialised: also finite or not, never read back), and the
// context's workspace, or a trial one where a candidate needs more.
// Allocated for the first shape that needs timing and freed when the plan is
// made, before the step's activations exist: the reported peak is the larger
// of the two, not their sum (resnet50 b256: at most about 2.5 GB at model
// build against about 13 GB in the step).
struct TrialOperands {
  std::size_t x_bytes = 0, y_bytes = 0, dw_bytes = 0;
  DType dtype = DType::bf16;
  const void* w16 = nullptr;
  DeviceBytes x, y, dw;
  void* stream = nullptr;

  // False where the GPU has no room for them: the heuristics' first stands.
  bool ready() {
    if (x.size() > 0) return true;
    x = DeviceBytes::up_to(x_bytes, x_bytes);
    y = DeviceBytes::up_to(y_bytes, y_bytes);
    dw = DeviceBytes::up_to(dw_bytes, dw_bytes);
    if (x.size() < x_bytes || y.size() < y_bytes || dw.size() < dw_bytes) {
      x = DeviceBytes(), y = DeviceBytes(), dw = DeviceBytes();
      return false;
    }
    fill();
    return true;
  }
  // x and dy (y) hold the trial pattern (kernels/trial_pattern.cuh): values
  // of at most 1/4, of zero mean, so sums of many products stay small and
  // finite in fp16 too; a weight gradient's entries are known from them
  // (ops/wgrad_spot_check.h). Again before the weight gradients are checked:
  // a data operation's candidates write x or y.
  void fill() const {
    const std::size_t size = dtype_size(dtype);
    kernels::fill_trial_pattern_cuda(x.get(), dtype, x_bytes / size, kTrialSeedX, stream);
    kernels::fill_trial_pattern_cuda(y.get(), dtype, y_bytes / size, kTrialSeedDy, stream);
  }
};

// What checks a timed candidate's result (ConvGraphCache::choose): prepare()
// before the candidates run, poison() before each one's runs (its output
// NaN), verdict(candidate) after they ran on the trial operands ("" where
// its result is right, else why not). untimed_ok(candidate), where set, says
// whether the candidate may run though nothing timed it (no room on the GPU
// to time, or none could be timed): a GEMM whose library may have no
// algorithm for its operands' alignments must not be taken untried.
//
// untimed_name(name), where set, is what a batch that was not timed builds in
// place of the timed batch's choice `name` (a GEMM's first algorithm for a
// later-ranked one, which another row count may not rank).
template <class Graph>
struct CandidateCheck {
  std::function<void()> prepare, poison;
  std::function<std::string(const Graph&)> verdict;
  std::function<bool(const Graph&)> untimed_ok;
  std::function<std::string(const std::string&)> untimed_name;
};

// Candidates timed per dW dtype and memory order (or per data operation):
// the heuristics' first few deterministic engines (a weight gradient of NHWC
// data with a 3x3 filter: up to 12). Round 7 saw the first
// one run resnet50's layer1 weight gradients at about 30 times the forward's
// time; the others cost a build each, once per shape.
constexpr std::size_t kCandidatesTimed = 3;
// A later candidate is chosen only if it is more than this much faster than
// every earlier one (ops/conv_engine_record.h's choose_by_time): engines of
// one speed are told apart by the heuristics' order, not by noise.
constexpr float kTimingTie = 0.10f;

// RINGTRAIN_CONV_API=legacy keeps the stored forward and backward data on the
// legacy API's algorithms (to compare the two engine choices on a GPU); unset
// or `graph`, the graph API's engines where it has them.
bool data_graphs_wanted() {
  const char* v = std::getenv("RINGTRAIN_CONV_API");
  if (v == nullptr || *v == '\0' || std::string_view(v) == "graph") return true;
  RT_CHECK(std::string_view(v) == "legacy",
           "RINGTRAIN_CONV_API={}: expected graph (the default) or legacy", v);
  return false;
}

// RINGTRAIN_CONV_DW: which dW dtypes a bf16 weight gradient's candidates
// have: auto (the default: fp32 dW, and bf16 dW timed beside it), f32 (fp32
// dW only, x and dy widened where no engine has one) or bf16 (bf16 dW only,
// where an engine has one: a switch for tests and experiments, which runs
// the widening path on a GPU test). Read once; a bad value is refused.
enum class WgradDw { automatic, f32, bf16 };
WgradDw wgrad_dw_wanted() {
  static const WgradDw wanted = [] {
    const char* env = std::getenv("RINGTRAIN_CONV_DW");
    const std::string_view v = env == nullptr || *env == '\0' ? "auto" : env;
    RT_CHECK(v == "auto" || v == "f32" || v == "bf16",
             "RINGTRAIN_CONV_DW={}: expected auto (the default), f32 or bf16", v);
    return v == "f32" ? WgradDw::f32 : v == "bf16" ? WgradDw::bf16 : WgradDw::automatic;
  }();
  return wanted;
}
// RINGTRAIN_CONV_WGRAD: which kinds of weight-gradient engines a 16-bit
// convolution's candidates have: auto (the default: cuDNN's graph engines,
// and ringtrain's GEMMs of ops/cuda/gpu_gemm_wgrad.h timed beside them
// where they apply), graph (cuDNN's alone) or gemm (the first GEMM form
// alone wherever it is sure to have an algorithm, gemm_wgrad_sure; as auto
// elsewhere: the switch a GPU test runs them by). Read once.
enum class WgradEngines { automatic, graph, gemm };
WgradEngines wgrad_engines_wanted() {
  static const WgradEngines wanted = [] {
    const char* env = std::getenv("RINGTRAIN_CONV_WGRAD");
    const std::string_view v = env == nullptr || *env == '\0' ? "auto" : env;
    RT_CHECK(v == "auto" || v == "graph" || v == "gemm",
             "RINGTRAIN_CONV_WGRAD={}: expected auto (the default), graph or gemm", v);
    return v == "graph"  ? WgradEngines::graph
           : v == "gemm" ? WgradEngines::gemm
                         : WgradEngines::automatic;
  }();
  return wanted;
}
// Part of a weight gradient's remembered-choice key: another setting, or
// another release's candidate set, lists other candidates (" +gemm2": the
// GEMMs are among them, the unfolded input at stride 1 too; a choice
// remembered before they were is timed again, not kept).
std::string wgrad_key() {
  std::string key;
  switch (wgrad_dw_wanted()) {
    case WgradDw::f32:
      key = " dW f32";
      break;
    case WgradDw::bf16:
      key = " dW bf16";
      break;
    case WgradDw::automatic:
      break;
  }
  switch (wgrad_engines_wanted()) {
    case WgradEngines::graph:
      return key + " wgrad graph";
    case WgradEngines::gemm:
      return key + " wgrad gemm";
    case WgradEngines::automatic:
      break;
  }
  return key + " +gemm2";
}

// The context's graph-API convolution graphs by shape. A graph is launched
// with the tensors' addresses (its run is const), so the layers of one shape
// share it: resnet50's 53 convolutions have 23 shapes, and each build
// (heuristics, support checks, compilation, and the candidates' timing)
// blocks the host on the first step.
//
// Where timing is wanted (RINGTRAIN_CONV_TUNE, default on) and a plan is made
// with its trial operands (its maximum batch, at model build), the first few
// deterministic engines of each operation are built and each is timed on the
// shape, as PyTorch's cudnn.benchmark does but deterministic engines only:
// the weight gradient's candidates are fp32-dW engines, then 16-bit-dW ones
// (autocast's dW, widened into the fp32 gradient), then, for a channels-last
// shape, ringtrain's GEMMs (ops/cuda/gpu_gemm_wgrad.h: shifted rows or the
// unfolded input). The choice is remembered by GPU, cuDNN and cuBLASLt
// versions and shape (ops/conv_engine_record.h), in the process and a file,
// and a remembered one is taken without timing: a later run, a
// resumed one, the ranks of a node run the same engines. A later batch size
// of the shape, or a plan made during a stream capture, is not timed: it
// takes the engine chosen at the timed batch where that builds for its own
// (a GEMM is built by its name, which holds its cap, not its chunk count),
// else the first candidate not found wrong or failing there. With
// RINGTRAIN_CONV_TUNE=off the heuristics' first deterministic engine runs,
// fp32 dW where one exists.
struct ConvGraphCache {
  template <class Graph>
  struct Built {
    std::shared_ptr<Graph> graph;  // null: refused, for `why`
    std::string why, how;
  };
  std::map<std::pair<ConvGraphShape, ConvDataOp>, Built<ConvDataGraph>> data;
  std::map<ConvGraphShape, Built<ConvWgradGraph>> wgrad;
  // Weight-gradient shapes (any batch: n 0) whose heuristics' first engine
  // gave a wrong result when timed, with why: an untimed batch of the shape
  // (a smaller last or evaluation batch) runs no graph engine either.
  std::map<ConvGraphShape, std::string> wrong_first;
  // What the timing at one batch size of a shape (its largest, at model
  // build) tells its others, which are not timed: the engine chosen there
  // (timed or remembered), and those that gave a wrong result or failed to
  // run there, which an untimed batch never takes (with another batch they
  // would compute a wrong gradient, or fail at the step). Keyed by the
  // shape's record key with n 0.
  struct TimedAtAnotherBatch {
    std::string chosen;
    std::set<std::string> unusable;
  };
  std::map<std::string, TimedAtAnotherBatch> timed_at_another_batch;

  // The graph (or refusal) of `key`, built on its first request.
  template <class Map, class Key, class Build>
  static auto find_or_build(Map& built, const Key& key, std::string* why_not, std::string* how,
                            Build build) {
    auto it = built.find(key);
    if (it == built.end()) {
      typename Map::mapped_type b;
      b.graph = build(&b.why, &b.how);
      if (b.graph) b.why.clear();  // a refusal on the way (a remembered engine gone) is no reason
      it = built.emplace(key, std::move(b)).first;
    }
    *why_not = it->second.why;
    *how = it->second.how;
    return it->second.graph;
  }

  // The shape's part of a record key; a graph engine's key also names what
  // lists its candidates (the heuristics mode; for the weight gradient
  // RINGTRAIN_CONV_DW, RINGTRAIN_CONV_WGRAD and the GEMMs), which the legacy
  // API's algorithms do not depend on.
  static std::string shape_key(const ConvGraphShape& s, const char* op, bool graph = true) {
    const bool wgrad = graph && std::string_view(op) == "wgrad";
    return fmt::format("{}{}|{} {} n{} c{} h{} w{} k{} r{} s{} p{} q{} pad{}x{} stride{}x{} {}",
                       graph ? conv_heuristics_mode_name() : "legacy API", wgrad ? wgrad_key() : "",
                       op, dtype_name(s.dtype), s.n, s.c, s.h, s.w, s.k, s.r, s.s, s.p, s.q,
                       s.pad_h, s.pad_w, s.stride_h, s.stride_w, s.nhwc ? "nhwc" : "nchw");
  }
  static bool timing(const TrialOperands* trial) {
    return trial != nullptr && conv_engine_timing_wanted() && !stream_is_capturing(trial->stream);
  }

  // The engine for `what`: build(wanted) lists the candidates (preference
  // order). Where timing, the remembered engine (only it is built), else each
  // candidate timed on the trial operands and the choice of choose_by_time
  // kept and remembered, all under the record's lock (ranks that reach the
  // shape at once take one choice); else the heuristics' first.
  // run(c, workspace) launches candidate c on the trial operands; where
  // `check` is given, a candidate whose result it finds wrong is passed over
  // (and said).
  // *first_wrong (where given) says whether the heuristics' first was found
  // wrong, none other timed, and so none was chosen. `family` is what names
  // the shape at any batch (timed_at_another_batch's key).
  template <class Graph, class Build, class Name, class Run>
  std::shared_ptr<Graph> choose(const std::string& what, const std::string& family,
                                DeviceBytes& workspace, TrialOperands* trial, Build build,
                                Name name_of, Run run, std::string* how,
                                const CandidateCheck<Graph>* check = nullptr,
                                bool* first_wrong = nullptr) {
    // Whether a candidate may run untried (check->untimed_ok; any, unless said).
    const auto sure = [&](const Graph& c) {
      return check == nullptr || !check->untimed_ok || check->untimed_ok(c);
    };
    if (!timing(trial)) {
      // The timed batch's engine (or its stand-in: untimed_name), where it
      // builds for this batch and may run untried here.
      const auto known = timed_at_another_batch.find(family);
      if (known != timed_at_another_batch.end() && !known->second.chosen.empty()) {
        const std::string want = check != nullptr && check->untimed_name
                                     ? check->untimed_name(known->second.chosen)
                                     : known->second.chosen;
        for (auto& c : build(EngineWanted{.most = 1, .only = want}))
          if (name_of(*c) == want && sure(*c) && !known->second.unusable.contains(want)) {
            *how = want == known->second.chosen
                       ? "untimed: the engine chosen at the timed batch"
                       : "untimed: the first algorithm of the GEMM chosen at the timed batch";
            return std::move(c);
          }
      }
      static const std::set<std::string> kNone;
      const std::set<std::string>& unusable =
          known != timed_at_another_batch.end() ? known->second.unusable : kNone;
      // The heuristics' first, or where the timed batch found engines
      // unusable, the first of as many as it timed that is not one of them.
      auto candidates = build(
          EngineWanted{.most = unusable.empty() ? std::size_t{1} : kCandidatesTimed, .only = {}});
      const auto pick = first_usable_untimed(candidates.size(), {}, {}, [&](std::size_t i) {
        return !unusable.contains(name_of(*candidates[i])) && sure(*candidates[i]);
      });
      if (!pick) {
        if (!candidates.empty())
          *how = fmt::format(
              "none of {}, untimed: each failed, was wrong at the timed batch or "
              "is not sure to run",
              candidates.size());
        return nullptr;
      }
      if (*pick > 0) *how = "untimed: the first not found unusable at the timed batch";
      return std::move(candidates[*pick]);
    }
    TimedAtAnotherBatch& taught = timed_at_another_batch[family];
    const auto started = std::chrono::steady_clock::now();
    const auto seconds = [&] {
      return std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    };
    std::shared_ptr<Graph> chosen;
    conv_engine_record().decide(
        engine_record_device() + "|" + what,
        [&](const std::optional<std::string>& kept) -> std::string {
          if (kept) {
            for (auto& c : build(EngineWanted{.most = 1, .only = *kept}))
              if (name_of(*c) == *kept) {
                chosen = std::move(c);
                *how = fmt::format("remembered, {:.2f} s", seconds());
                taught.chosen = *kept;
                return *kept;
              }
          }
          auto candidates = build(EngineWanted{.most = kCandidatesTimed, .only = {}});
          if (candidates.empty()) return {};
          // Untimed: the first that may run untried and neither failed to
          // run nor gave a wrong result (none: the caller's own path runs
          // the shape).
          const auto take_untimed = [&](const std::string& why_untimed,
                                        const std::vector<std::string>& wrong = {},
                                        const std::vector<std::string>& failed = {}) {
            const auto pick =
                first_usable_untimed(candidates.size(), wrong, failed,
                                     [&](std::size_t i) { return sure(*candidates[i]); });
            if (!pick) {
              *how = fmt::format("none of {} ({}; none is sure to run)", candidates.size(),
                                 why_untimed);
              return;
            }
            *how = fmt::format("{}, untimed ({})", *pick == 0 ? "the first" : "the first usable",
                               why_untimed);
            chosen = std::move(candidates[*pick]);
          };
          if (!trial->ready()) {
            take_untimed("no room on the GPU to time them");
            return {};
          }
          std::vector<std::size_t> need(candidates.size());
          for (std::size_t i = 0; i < candidates.size(); ++i)
            need[i] = candidates[i]->workspace_bytes();
          const std::size_t most = *std::max_element(need.begin(), need.end());
          // The context's workspace where it is large enough, else a trial
          // one of up to the largest need (a candidate that does not fit is
          // not run).
          DeviceBytes own;
          DeviceBytes* ws = &workspace;
          if (most > workspace.size()) {
            own = DeviceBytes::up_to(most, std::min(most, kMinTrialWorkspace));
            if (own.size() > workspace.size()) ws = &own;
          }
          ResultCheck results;
          if (check != nullptr) {
            check->prepare();
            results.before = [&](std::size_t) { check->poison(); };
            results.verdict = [&](std::size_t i) { return check->verdict(*candidates[i]); };
          }
          std::vector<std::string> wrong, failed;
          const std::vector<float> ms = time_candidates(
              trial->stream, need, ws->size(),
              [&](std::size_t i) { run(*candidates[i], ws->get()); },
              check != nullptr ? &results : nullptr, &wrong, &failed);
          const std::optional<std::size_t> fastest = choose_by_time(ms, need, kTimingTie);
          const std::size_t pick = fastest.value_or(0);
          std::vector<std::string> names;
          for (const auto& c : candidates) names.push_back(name_of(*c));
          for (std::size_t i = 0; i < wrong.size(); ++i)
            if (!wrong[i].empty())
              log_warn("conv2d: {}: candidate {} is not used: its result is wrong: {}", what,
                       names[i], wrong[i]);
          note_candidate_times(what, names, ms, need, fastest.value_or(names.size()), wrong,
                               failed);
          // Those an untimed batch might take (not a GEMM's later rank,
          // which it never does) that were wrong or failed here.
          for (std::size_t i = 0; i < names.size(); ++i)
            if (((i < wrong.size() && !wrong[i].empty()) ||
                 (i < failed.size() && !failed[i].empty())) &&
                sure(*candidates[i]))
              taught.unusable.insert(names[i]);
          // None timed, and the heuristics' first gave a wrong result: none
          // runs (the caller's own path does), not remembered.
          if (!fastest && !wrong.empty() && !wrong[0].empty()) {
            *how = fmt::format("none of {}: the heuristics' first gave a wrong result ({})",
                               candidates.size(), wrong[0]);
            if (first_wrong != nullptr) *first_wrong = true;
            return std::string();
          }
          if (!fastest) {
            take_untimed(fmt::format("none of {} could be timed", candidates.size()), wrong,
                         failed);
            return {};
          }
          *how = timed_choice_note(ms, pick, seconds());
          chosen = std::move(candidates[pick]);
          // Only a timed choice is remembered.
          taught.chosen = name_of(*chosen);
          return taught.chosen;
        });
    return chosen;
  }

  std::shared_ptr<ConvDataGraph> data_graph(const GpuHandles& h, const ConvGraphShape& s,
                                            ConvDataOp op, DeviceBytes& workspace,
                                            TrialOperands* trial, std::string* why_not,
                                            std::string* how) {
    const bool forward = op == ConvDataOp::forward;
    return find_or_build(data, std::pair{s, op}, why_not, how,
                         [&](std::string* why, std::string* chosen) {
                           ConvGraphShape any_batch = s;
                           any_batch.n = 0;
                           const char* what = forward ? "fprop" : "dgrad";
                           auto graph = choose<ConvDataGraph>(
                               shape_key(s, what), shape_key(any_batch, what), workspace, trial,
                               [&](const EngineWanted& wanted) {
                                 return ConvDataGraph::candidates(h, s, op, wanted, why);
                               },
                               [](const ConvDataGraph& g) { return g.engine(); },
                               [&](const ConvDataGraph& g, void* ws) {
                                 if (forward)
                                   g.run(h, trial->x.get(), trial->w16, trial->y.get(), ws);
                                 else
                                   g.run(h, trial->y.get(), trial->w16, trial->x.get(), ws);
                               },
                               chosen);
                           // No graph: the choice's reason, where it gives
                           // one, over a refusal met on the way.
                           if (graph == nullptr && !chosen->empty()) *why = *chosen;
                           return graph;
                         });
  }

  // A weight-gradient candidate's name: the engine, its dW dtype and order.
  static std::string wgrad_name(const ConvWgradGraph& g) {
    return fmt::format("{} dW {} {}", g.engine(), dtype_name(g.dw_dtype()),
                       g.writes_kcrs() ? "KCRS" : "KRSC");
  }

  std::shared_ptr<ConvWgradGraph> wgrad_graph(const GpuHandles& h, const ConvGraphShape& s,
                                              DeviceBytes& workspace, TrialOperands* trial,
                                              std::string* why_not, std::string* how) {
    return find_or_build(wgrad, s, why_not, how, [&](std::string* why, std::string* chosen) {
      // fp32-dW engines, then bf16-dW ones: timed beside them, or alone
      // where no fp32 one is. Never an fp16 dW: under a loss scale (65,536 at
      // first) it would overflow where fp32 does not, and skip steps that
      // depend on which engine timed fastest; fp16 data without an fp32-dW
      // engine widens x and dy instead, as before. A remembered name
      // ("<engine> dW <dtype> <order>") builds only its own dtype's engine.
      const auto build = [&](const EngineWanted& wanted) {
        std::vector<std::unique_ptr<ConvWgradGraph>> candidates;
        std::string why32, why16;
        EngineWanted engine = wanted;
        std::string only_dtype;
        if (!wanted.only.empty()) {
          const std::size_t space = wanted.only.find(" dW ");
          engine.only = wanted.only.substr(0, space);
          if (space != std::string::npos) only_dtype = wanted.only.substr(space + 4);
          only_dtype = only_dtype.substr(0, only_dtype.find(' '));
        }
        const auto wants = [&](DType t) {
          return only_dtype.empty() || only_dtype == dtype_name(t);
        };
        const WgradDw dw = wgrad_dw_wanted();
        const WgradEngines kinds = wgrad_engines_wanted();
        // ringtrain's GEMMs (fp32 dW): timed after the graph engines
        // (the heuristics' first stays first), taken where remembered, or
        // alone under RINGTRAIN_CONV_WGRAD=gemm; where they do not apply,
        // the graph engines as under auto.
        std::string why_gemm;
        std::vector<std::unique_ptr<ConvWgradGraph>> gemms;
        const bool gemms_allowed =
            kinds != WgradEngines::graph && wants(DType::f32) && dw != WgradDw::bf16;
        // A GEMM by name (remembered, or chosen at another batch): built as
        // named, even where this batch's list would not hold it (its 32 MiB
        // chunking the same as its 256 MiB one here).
        if (names_gemm_wgrad(engine.only)) {
          if (gemms_allowed)
            if (auto g = gemm_wgrad_named(s, engine.only)) candidates.push_back(std::move(g));
          if (candidates.empty()) *why = "no engine named " + engine.only;
          return candidates;
        }
        if (gemms_allowed && engine.only.empty()) gemms = gemm_wgrad_candidates(s, &why_gemm);
        // Untried, a GEMM runs only where cuBLASLt surely has an algorithm
        // (gemm_wgrad_sure: every operand 16-byte aligned, rows included),
        // as does RINGTRAIN_CONV_WGRAD=gemm's (the first form, alone); a
        // timed one that cuBLASLt refuses is passed over by the timing, and
        // a remembered one ran at the same alignments when it was timed.
        const bool sure = !gemms.empty() && gemm_wgrad_sure(s, *gemms.front());
        if (kinds == WgradEngines::gemm && sure) {
          candidates.push_back(std::move(gemms.front()));
          return candidates;
        }
        if (wants(DType::f32) && dw != WgradDw::bf16)
          candidates = ConvWgradGraph::candidates(h, s, DType::f32, engine, &why32);
        if (s.dtype == DType::bf16 && wants(s.dtype) && dw != WgradDw::f32 &&
            (timing(trial) || candidates.empty()))
          for (auto& c : ConvWgradGraph::candidates(h, s, s.dtype, engine, &why16))
            candidates.push_back(std::move(c));
        // Timed, all of them; untimed, the first where no graph engine runs
        // the shape (a 3-channel first convolution): rather than x and dy
        // widened to fp32 and a legacy algorithm's workspace.
        if (timing(trial))
          for (auto& g : gemms) candidates.push_back(std::move(g));
        else if (candidates.empty() && sure)
          candidates.push_back(std::move(gemms.front()));
        if (candidates.empty())
          *why = why32.empty() || why16.empty() ? why32 + why16 : why32 + "; " + why16;
        return candidates;
      };
      // Each candidate's dW checked at a few entries against double-precision
      // sums of the trial pattern, computed on the host while the GPU times.
      std::future<std::vector<WgradSpot>> spots_coming;
      std::vector<WgradSpot> spots;
      const CandidateCheck<ConvWgradGraph> check{
          .prepare =
              [&] {
                trial->fill();
                spots_coming = std::async(std::launch::async, [s] { return wgrad_spots(s); });
              },
          // All ones: NaN as fp32, bf16 and fp16.
          .poison =
              [&] {
                RT_CUDA_CHECK(cudaMemsetAsync(trial->dw.get(), 0xFF, trial->dw_bytes,
                                              static_cast<cudaStream_t>(trial->stream)));
              },
          .verdict = [&](const ConvWgradGraph& g) -> std::string {
            if (spots_coming.valid()) spots = spots_coming.get();
            std::vector<std::byte> dw(s.k * s.c * s.r * s.s * dtype_size(g.dw_dtype()));
            const auto stream = static_cast<cudaStream_t>(trial->stream);
            RT_CUDA_CHECK(cudaMemcpyAsync(dw.data(), trial->dw.get(), dw.size(),
                                          cudaMemcpyDeviceToHost, stream));
            RT_CUDA_CHECK(cudaStreamSynchronize(stream));
            return wgrad_spot_disagreement(s, spots, dw.data(), g.dw_dtype(), g.writes_kcrs());
          },
          // A GEMM untried only where cuBLASLt surely has an algorithm
          // (cuDNN's engines were built for the shape).
          .untimed_ok =
              [&](const ConvWgradGraph& g) {
                return !names_gemm_wgrad(g.engine()) || gemm_wgrad_sure(s, g);
              },
          // A GEMM's first algorithm in place of a later-ranked one.
          .untimed_name = gemm_wgrad_first_rank};
      ConvGraphShape any_batch = s;
      any_batch.n = 0;
      if (!timing(trial))
        if (const auto known = wrong_first.find(any_batch); known != wrong_first.end()) {
          *why = known->second;
          return std::shared_ptr<ConvWgradGraph>();
        }
      bool first_wrong = false;
      auto graph = choose<ConvWgradGraph>(
          shape_key(s, "wgrad"), shape_key(any_batch, "wgrad"), workspace, trial, build, wgrad_name,
          [&](const ConvWgradGraph& g, void* ws) {
            g.run(h, trial->x.get(), trial->y.get(), trial->dw.get(), ws);
          },
          chosen, &check, &first_wrong);
      if (first_wrong) wrong_first[any_batch] = *chosen;
      // No graph: why the choice made none where it says (a refusal met on
      // the way, a remembered engine gone, is no reason then).
      if (graph == nullptr && (why->empty() || !chosen->empty())) *why = *chosen;
      return graph;
    });
  }
};

ConvGraphCache& conv_graphs_of(const GpuHandles& h) {
  RT_CHECK(h.conv_graphs != nullptr, "conv2d: a GPU context without its graph cache");
  return *static_cast<ConvGraphCache*>(h.conv_graphs.get());
}

class CudnnConvPlan final : public GpuConvPlan {
 public:
  CudnnConvPlan(const GpuHandles& h, const Conv2dGeometry& g, std::size_t max_batch)
      : dnn_(static_cast<cudnnHandle_t>(h.dnn)),
        stream_(static_cast<cudaStream_t>(h.stream)),
        g_(g),
        // A 16-bit context's fp32 interface (a layer's unstored path) is given
        // values on the 16-bit grid, which TF32 holds exactly (bf16 has 8
        // significant bits, fp16 11, TF32 11): TF32 tensor cores multiply them
        // exactly and accumulate in fp32, as the 16-bit algorithms do, without
        // the casts into 16-bit copies that path used to make.
        tf32_(h.conv_tf32 || h.precision != DType::f32),
        handles_(&h),
        precision_(h.precision),
        workspace_(*static_cast<DeviceBytes*>(h.conv_workspace.get())) {
    try {
      RT_CUDNN_CHECK(cudnnCreateFilterDescriptor(&w_desc_));
      RT_CUDNN_CHECK(cudnnSetFilter4dDescriptor(w_desc_, CUDNN_DATA_FLOAT, format(),
                                                i(g.out_channels), i(g.in_channels), i(g.kh()),
                                                i(g.kw())));
      if (sixteen_bit()) {
        RT_CUDNN_CHECK(cudnnCreateFilterDescriptor(&w16_desc_));
        RT_CUDNN_CHECK(cudnnSetFilter4dDescriptor(w16_desc_, data16(), format(), i(g.out_channels),
                                                  i(g.in_channels), i(g.kh()), i(g.kw())));
      }
      for (cudnnMathType_t m : {CUDNN_DEFAULT_MATH, CUDNN_TENSOR_OP_MATH, CUDNN_FMA_MATH}) {
        cudnnConvolutionDescriptor_t& d = conv_[static_cast<std::size_t>(m)];
        RT_CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&d));
        RT_CUDNN_CHECK(cudnnSetConvolution2dDescriptor(d, i(g.ph()), i(g.pw()), i(g.sh()),
                                                       i(g.sw()), 1, 1, CUDNN_CROSS_CORRELATION,
                                                       CUDNN_DATA_FLOAT));
        RT_CUDNN_CHECK(cudnnSetConvolutionMathType(d, m));
      }
      if (sixteen_bit()) w16_ = DeviceBytes(weight_elements() * sizeof(std::uint16_t));
      entries_.reserve(4);
      plan_max_batch(add_entry(std::max<std::size_t>(max_batch, 1)));
    } catch (...) {
      release();
      throw;
    }
  }

  ~CudnnConvPlan() override { release(); }

  void forward(const float* x, const float* w, float* y, std::size_t batch) override {
    w = filter_for_layout(w);
    Entry& e = entry(batch);
    const auto find = [&](const DeviceBytes& ws, std::string* tried) {
      return find_forward(e, false, x, w, y, ws, tried);
    };
    if (!e.fwd) e.fwd = choose_later("forward", batch, find);
    fit_choice(e.fwd, "forward", batch, find);
    const float one = 1.0f, zero = 0.0f;
    RT_CUDNN_CHECK(cudnnConvolutionForward(dnn_, &one, e.x, x, w_desc_, w, conv_for(e.fwd->math),
                                           static_cast<cudnnConvolutionFwdAlgo_t>(e.fwd->algo),
                                           workspace_.get(), workspace_.size(), &zero, e.y, y));
    // A 16-bit context: y on the grid, as the stored path writes it (and as
    // the CPU rounds it), before the layer adds any bias.
    if (sixteen_bit()) gpu_round_to_precision(stream_, y, y, batch * out_elements(), precision_);
  }

  void backward_filter(const float* x, const float* dy, float* dw, std::size_t batch,
                       bool accumulate) override {
    Entry& e = entry(batch);
    const auto find = [&](const DeviceBytes& ws, std::string* tried) {
      return find_backward_filter(e, x, dy, kMeasureAlgorithms ? filter_scratch() : nullptr, ws,
                                  tried);
    };
    if (!e.bwd_filter) e.bwd_filter = choose_later("backward-filter", batch, find);
    fit_choice(e.bwd_filter, "backward-filter", batch, find);
    const float one = 1.0f, beta = accumulate && !nhwc() ? 1.0f : 0.0f;
    float* out = nhwc() ? filter_krsc() : dw;
    RT_CUDNN_CHECK(cudnnConvolutionBackwardFilter(
        dnn_, &one, e.x, x, e.y, dy, conv_for(e.bwd_filter->math),
        static_cast<cudnnConvolutionBwdFilterAlgo_t>(e.bwd_filter->algo), workspace_.get(),
        workspace_.size(), &beta, w_desc_, out));
    if (!nhwc()) return;
    // [K, R, S, C] -> [K, C, R, S]: straight into dw, or beside it and added.
    const std::size_t rs = g_.kh() * g_.kw();
    float* back = accumulate ? filter_scratch() : dw;
    gpu_transpose_batched(stream_, out, back, g_.out_channels, rs, g_.in_channels);
    if (accumulate) gpu_axpy(stream_, 1.0f, back, dw, g_.out_channels * g_.in_channels * rs);
  }

  void backward_data(const float* w, const float* dy, float* dx, std::size_t batch) override {
    w = filter_for_layout(w);
    Entry& e = entry(batch);
    const auto find = [&](const DeviceBytes& ws, std::string* tried) {
      return find_backward_data(e, false, w, dy, dx, ws, tried);
    };
    if (!e.bwd_data) e.bwd_data = choose_later("backward-data", batch, find);
    fit_choice(e.bwd_data, "backward-data", batch, find);
    const float one = 1.0f, zero = 0.0f;
    RT_CUDNN_CHECK(
        cudnnConvolutionBackwardData(dnn_, &one, w_desc_, w, e.y, dy, conv_for(e.bwd_data->math),
                                     static_cast<cudnnConvolutionBwdDataAlgo_t>(e.bwd_data->algo),
                                     workspace_.get(), workspace_.size(), &zero, e.x, dx));
    // As the stored path writes it (and as the CPU rounds it).
    if (sixteen_bit()) gpu_round_to_precision(stream_, dx, dx, batch * in_elements(), precision_);
  }

  bool stores_16bit() const override { return forward16_ && backward_data16_; }

  void forward_stored(BufferView x, const float* w, BufferView y, std::size_t batch) override {
    require_stored(x, "x");
    require_stored(y, "y");
    Entry& e = entry(batch);
    const std::uint16_t* w16 = refresh_weights16(w);
    if (!e.data16_tried) plan_data16(e);
    if (e.fwd_graph) {
      require_workspace(e.fwd_graph->workspace_bytes());
      e.fwd_graph->run(*handles_, x.ptr, w16, y.ptr, workspace_.get());
      return;
    }
    const auto find = [&](const DeviceBytes& ws, std::string* t) {
      return find_forward(e, true, x.ptr, w16, y.ptr, ws, t);
    };
    if (!e.fwd16) e.fwd16 = choose_later("16-bit forward", e.batch, find);
    fit_choice(e.fwd16, "16-bit forward", e.batch, find);
    const float one = 1.0f, zero = 0.0f;
    RT_CUDNN_CHECK(
        cudnnConvolutionForward(dnn_, &one, e.x16, x.ptr, w16_desc_, w16, conv_for(e.fwd16->math),
                                static_cast<cudnnConvolutionFwdAlgo_t>(e.fwd16->algo),
                                workspace_.get(), workspace_.size(), &zero, e.y16, y.ptr));
  }

  void backward_filter_stored(BufferView x, BufferView dy, float* dw, std::size_t batch,
                              bool accumulate) override {
    require_stored(x, "x");
    require_stored(dy, "dy");
    Entry& e = entry(batch);
    if (!e.wgrad16_tried) plan_wgrad16(e);
    if (e.wgrad16) return wgrad16(*e.wgrad16, x, dy, dw, accumulate);
    // No 16-bit engine for this shape: x and dy widened, in the context's
    // scratch, grown here on the shape's first (eager) step.
    float* x32 = gpu_widening_buffer(*handles_, 0, x.count);
    float* dy32 = gpu_widening_buffer(*handles_, 1, dy.count);
    gpu_from_precision_bits(stream_, x32, x.as<const std::uint16_t>(), x.count, precision_);
    gpu_from_precision_bits(stream_, dy32, dy.as<const std::uint16_t>(), dy.count, precision_);
    backward_filter(x32, dy32, dw, batch, accumulate);
  }

  void backward_data_stored(const float*, BufferView dy, BufferView dx,
                            std::size_t batch) override {
    require_stored(dy, "dy");
    // The filter's 16-bit copy of this step's forward: the weights do not
    // change between a forward and its backward.
    RT_CHECK(w16_fresh_, "conv2d: a stored backward without a stored forward before it");
    const auto* w16 = static_cast<const std::uint16_t*>(w16_.get());
    Entry& e = entry(batch);
    // An fp32 dx is cuDNN's 16-bit dx widened, through buffer 0 of the
    // context's widening scratch (free here: the weight gradient is queued
    // before, on the same stream), grown on first use. (The model asks for
    // the 16-bit dx, even where it sums it in fp32.)
    const bool wide = dx.dtype == DType::f32;
    void* out =
        wide ? static_cast<void*>(gpu_widening_buffer(*handles_, 0, (dx.count + 1) / 2)) : dx.ptr;
    if (!wide) require_stored(dx, "dx");
    if (!e.data16_tried) plan_data16(e);
    if (e.dgrad_graph) {
      require_workspace(e.dgrad_graph->workspace_bytes());
      e.dgrad_graph->run(*handles_, dy.ptr, w16, out, workspace_.get());
    } else {
      const auto find = [&](const DeviceBytes& ws, std::string* t) {
        return find_backward_data(e, true, w16, dy.ptr, out, ws, t);
      };
      if (!e.bwd_data16) e.bwd_data16 = choose_later("16-bit backward-data", e.batch, find);
      fit_choice(e.bwd_data16, "16-bit backward-data", e.batch, find);
      const float one = 1.0f, zero = 0.0f;
      RT_CUDNN_CHECK(cudnnConvolutionBackwardData(
          dnn_, &one, w16_desc_, w16, e.y16, dy.ptr, conv_for(e.bwd_data16->math),
          static_cast<cudnnConvolutionBwdDataAlgo_t>(e.bwd_data16->algo), workspace_.get(),
          workspace_.size(), &zero, e.x16, out));
    }
    if (wide)
      gpu_from_precision_bits(stream_, dx.as<float>(), static_cast<const std::uint16_t*>(out),
                              dx.count, precision_);
  }

  std::string describe() const override {
    const auto one = [](const char* label, ConvAlgoOp op, const std::optional<Choice>& c) {
      if (!c) return fmt::format("{}=(not chosen yet)", label);
      return fmt::format(
          "{}={}{}{}", label, describe_conv_choice(op, c->algo, math_of(c->math), c->memory),
          c->passed_over.empty() ? std::string() : fmt::format(" (over {})", c->passed_over),
          c->how.empty() ? std::string() : fmt::format(" [{}]", c->how));
    };
    const std::string p = sixteen_bit() ? precision_label() : "";
    std::string out;
    for (const Entry& e : entries_) {
      if (!out.empty()) out += " | ";
      if (entries_.size() > 1) out += fmt::format("batch {}: ", e.batch);
      // What runs: the graph API's engine, else the legacy 16-bit algorithm
      // where the plan has one, else fp32.
      const std::string no_graph =
          e.data16_why.empty() ? std::string() : fmt::format(" (no graph: {})", e.data16_why);
      const auto how = [](const std::string& h) {
        return h.empty() ? std::string() : fmt::format(" [{}]", h);
      };
      if (e.fwd_graph)
        out += fmt::format("{} fwd=graph {}{}", p, e.fwd_graph->engine(), how(e.fwd_how));
      else if (forward16_)
        out += one(fmt::format("{} fwd", p).c_str(), ConvAlgoOp::forward, e.fwd16) + no_graph;
      else
        out += one(sixteen_bit() ? "fwd(fp32)" : "fwd", ConvAlgoOp::forward, e.fwd);
      if (e.wgrad16)
        out += fmt::format(
            "; {} bwd-filter={}{} ({}{}){}", p,
            names_gemm_wgrad(e.wgrad16->engine()) ? "" : "graph ", e.wgrad16->engine(),
            e.wgrad16->dw_dtype() == DType::f32 ? "fp32 dW" : fmt::format("{} dW widened", p),
            e.wgrad16->writes_kcrs() ? "" : ", [K,R,S,C] transposed", how(e.wgrad16_how));
      else
        out += "; " +
               one(sixteen_bit() ? "bwd-filter(fp32)" : "bwd-filter", ConvAlgoOp::backward_filter,
                   e.bwd_filter) +
               (e.wgrad16_why.empty() ? "" : fmt::format(" (no graph: {})", e.wgrad16_why));
      if (e.dgrad_graph)
        out +=
            fmt::format("; {} bwd-data=graph {}{}", p, e.dgrad_graph->engine(), how(e.dgrad_how));
      else if (backward_data16_)
        out += "; " +
               one(fmt::format("{} bwd-data", p).c_str(), ConvAlgoOp::backward_data, e.bwd_data16) +
               no_graph;
      else
        out += "; " + one(sixteen_bit() ? "bwd-data(fp32)" : "bwd-data", ConvAlgoOp::backward_data,
                          e.bwd_data);
    }
    if (nhwc())
      out += stores_16bit() ? "; nhwc (16-bit filter transposed once per forward)"
                            : "; nhwc (filter transposed per call)";
    return out;
  }

 private:
  static int i(std::size_t v) { return static_cast<int>(v); }
  bool sixteen_bit() const { return precision_ != DType::f32; }
  cudnnDataType_t data16() const {
    return precision_ == DType::f16 ? CUDNN_DATA_HALF : CUDNN_DATA_BFLOAT16;
  }
  const char* precision_label() const { return precision_ == DType::f16 ? "fp16" : "bf16"; }

  // A stored tensor is of the context's 16-bit dtype.
  void require_stored(const BufferView& v, const char* what) const {
    RT_CHECK(v.dtype == precision_, "conv2d: its {} is {}, not the context's {}", what,
             dtype_name(v.dtype), precision_label());
  }
  // The stored path's filter: the layer's fp32 compute weights (on the grid:
  // exact) narrowed into the plan's own 16-bit copy, in NHWC transposed to
  // [K, R, S, C] in the same kernel. Made once per forward; its backward
  // reads it as it is.
  const std::uint16_t* refresh_weights16(const float* w) {
    const std::size_t nw = weight_elements();
    const BufferView to{w16_.get(), nw, precision_, Device::cuda(0)};
    const BufferView from{const_cast<float*>(w), nw, DType::f32, Device::cuda(0)};
    if (nhwc())
      gpu_transpose_batched(stream_, from, to, g_.out_channels, g_.in_channels, g_.kh() * g_.kw());
    else
      gpu_to_precision_bits(stream_, static_cast<std::uint16_t*>(w16_.get()), w, nw, precision_);
    w16_fresh_ = true;
    return static_cast<const std::uint16_t*>(w16_.get());
  }

  // The graph-API weight gradient for e's batch, where cuDNN has a
  // deterministic engine for it (grow: make the shared workspace fit it now;
  // at plan time the caller sizes it with the rest).
  // The entry is marked planned only once its workspace fits: a growth that
  // fails (under a CUDA graph's capture, which cannot synchronise) leaves it
  // to be planned again by the eager step that follows.
  void plan_wgrad16(Entry& e, bool grow = true, TrialOperands* trial = nullptr) {
    std::string why, how;
    auto graph = conv_graphs_of(*handles_).wgrad_graph(*handles_, graph_shape(e.batch), workspace_,
                                                       trial, &why, &how);
    if (grow && graph && graph->workspace_bytes() > workspace_.size())
      replace_workspace(graph->workspace_bytes());
    e.wgrad16 = std::move(graph);
    e.wgrad16_why = std::move(why);
    e.wgrad16_how = std::move(how);
    e.wgrad16_tried = true;
  }
  ConvGraphShape graph_shape(std::size_t batch) const {
    ConvGraphShape s;
    s.n = batch;
    s.c = g_.in_channels;
    s.h = g_.height;
    s.w = g_.width;
    s.k = g_.out_channels;
    s.r = g_.kh();
    s.s = g_.kw();
    s.p = g_.out_height();
    s.q = g_.out_width();
    s.pad_h = g_.ph();
    s.pad_w = g_.pw();
    s.stride_h = g_.sh();
    s.stride_w = g_.sw();
    s.nhwc = nhwc();
    s.dtype = precision_;
    return s;
  }

  // The graph API's forward and backward data for e's batch (on the stored
  // path; the legacy algorithms stay where it has none). grow: as plan_wgrad16.
  void plan_data16(Entry& e, bool grow = true, TrialOperands* trial = nullptr) {
    if (!data_graphs_wanted()) {
      e.data16_why = "RINGTRAIN_CONV_API=legacy";
      e.data16_tried = true;
      return;
    }
    const ConvGraphShape s = graph_shape(e.batch);
    std::string fwd_why, dgrad_why;
    ConvGraphCache& graphs = conv_graphs_of(*handles_);
    auto fwd = graphs.data_graph(*handles_, s, ConvDataOp::forward, workspace_, trial, &fwd_why,
                                 &e.fwd_how);
    auto dgrad = graphs.data_graph(*handles_, s, ConvDataOp::backward_data, workspace_, trial,
                                   &dgrad_why, &e.dgrad_how);
    std::size_t need = 0;
    for (const auto& g : {fwd, dgrad})
      if (g) need = std::max(need, g->workspace_bytes());
    if (grow && need > workspace_.size()) replace_workspace(need);  // as plan_wgrad16
    e.fwd_graph = std::move(fwd);
    e.dgrad_graph = std::move(dgrad);
    e.data16_why.clear();
    if (!fwd_why.empty()) e.data16_why = "forward: " + fwd_why;
    if (!dgrad_why.empty())
      e.data16_why += (e.data16_why.empty() ? "" : "; ") + ("backward data: " + dgrad_why);
    e.data16_tried = true;
  }
  // A larger shared workspace in place of the old one, which earlier launches
  // (of any of the context's convolutions) may still read, and which a
  // captured CUDA graph may hold (stream_graph.h).
  void replace_workspace(std::size_t bytes) {
    if (try_replace_workspace(bytes)) return;
    std::size_t free = 0, total = 0;
    (void)cudaMemGetInfo(&free, &total);
    RT_CHECK(false,
             "conv2d: the convolutions' shared cuDNN workspace of {} bytes does not fit in the "
             "GPU's free memory ({} of {} bytes free): use a smaller batch",
             bytes, free, total);
  }
  // The same, false where cudaMalloc has no room: the workspace is then one
  // of the size it had (at another address: freed first, never both at once).
  bool try_replace_workspace(std::size_t bytes) {
    RT_CUDA_CHECK(cudaStreamSynchronize(stream_));
    const std::size_t old = workspace_.size();
    workspace_ = DeviceBytes();
    workspace_ = DeviceBytes::up_to(bytes, bytes);
    const bool grown = workspace_.size() >= bytes;
    if (!grown) workspace_ = DeviceBytes(old);
    note_graph_buffers_moved();
    return grown;
  }
  // The shared workspace grown to `bytes` (a choice made within a larger
  // trial workspace, run for the first time).
  void fit_workspace(std::size_t bytes) {
    if (bytes > workspace_.size()) replace_workspace(bytes);
  }
  // The workspace grown for a choice's first run, as fit_workspace; where the
  // GPU has no room for it (the heuristics choose within kWorkspaceCap,
  // whatever is free, so that runs repeat bit for bit), the operation is
  // chosen again within the workspace as it is, and that is said once: a
  // late first call (an evaluation batch, a storing plan's first fp32 call)
  // then runs, on a choice that depends on the memory, where it would end
  // the run.
  template <typename Find>
  void fit_choice(std::optional<Choice>& c, const char* op, std::size_t batch, Find&& find) {
    if constexpr (kMeasureAlgorithms) return fit_workspace(c->memory);  // Find measured within it
    if (c->memory <= workspace_.size() || try_replace_workspace(c->memory)) return;
    std::string tried;
    const DeviceBytes within = DeviceBytes::size_only(workspace_.size());
    const std::size_t wanted = c->memory;
    c = find(within, &tried);
    require(c, op, batch, within.size(), tried);
    if (!low_workspace_warned.exchange(true)) {
      log_warn(
          "conv2d {}x{}x{} -> {}, batch {}: no room on the GPU for the {} byte cuDNN workspace "
          "its {} algorithm asks for; chosen again within the {} bytes allocated, a choice that "
          "depends on the free memory (further such choices are not reported)",
          g_.in_channels, g_.height, g_.width, g_.out_channels, batch, wanted, op, within.size());
    }
  }
  void require_workspace(std::size_t bytes) const {
    RT_CHECK(bytes <= workspace_.size(), "conv2d: a graph needs a {} byte workspace, {} are shared",
             bytes, workspace_.size());
  }

  // dW (fp32, [K, C, R, S]) from the 16-bit x and dy on tensor cores: straight
  // into dw, or beside it (accumulated, or a [K, R, S, C] engine's output
  // transposed back) and added, as backward_filter's fp32 path does.
  void wgrad16(const ConvWgradGraph& graph, BufferView x, BufferView dy, float* dw,
               bool accumulate) {
    const std::size_t nw = g_.out_channels * g_.in_channels * g_.kh() * g_.kw();
    RT_CHECK(graph.workspace_bytes() <= workspace_.size(),
             "conv2d: the graph's weight gradient needs a {} byte workspace, {} are shared",
             graph.workspace_bytes(), workspace_.size());
    if (graph.dw_dtype() != DType::f32) return wgrad16_narrow(graph, x, dy, dw, accumulate);
    if (graph.writes_kcrs()) {
      // cuDNN's graph tensors are 16-byte aligned by default, and dw sits in
      // the flat gradient buffer at its parameter's offset (a multiple of 4
      // bytes): a misaligned one is written beside it and copied.
      const bool direct = !accumulate && reinterpret_cast<std::uintptr_t>(dw) % 16 == 0;
      float* out = direct ? dw : filter_scratch();
      graph.run(*handles_, x.ptr, dy.ptr, out, workspace_.get());
      if (accumulate)
        gpu_axpy(stream_, 1.0f, out, dw, nw);
      else if (!direct)
        RT_CUDA_CHECK(
            cudaMemcpyAsync(dw, out, nw * sizeof(float), cudaMemcpyDeviceToDevice, stream_));
      return;
    }
    float* krsc = filter_krsc();
    graph.run(*handles_, x.ptr, dy.ptr, krsc, workspace_.get());
    float* back = accumulate ? filter_scratch() : dw;
    gpu_transpose_batched(stream_, krsc, back, g_.out_channels, g_.kh() * g_.kw(), g_.in_channels);
    if (accumulate) gpu_axpy(stream_, 1.0f, back, dw, nw);
  }

  // A 16-bit dW (autocast's, chosen where it timed faster than every fp32
  // one): written into the filter scratch, then widened into dw, added
  // widened where accumulating, and a [K, R, S, C] one transposed as it is
  // widened.
  void wgrad16_narrow(const ConvWgradGraph& graph, BufferView x, BufferView dy, float* dw,
                      bool accumulate) {
    const std::size_t nw = weight_elements();
    void* narrow = filter_krsc();  // fp32-sized: room for the 16-bit dW
    graph.run(*handles_, x.ptr, dy.ptr, narrow, workspace_.get());
    const BufferView from{narrow, nw, precision_, Device::cuda(0)};
    if (graph.writes_kcrs()) {
      if (accumulate)
        gpu_add_widened(stream_, BufferView{dw, nw, DType::f32, Device::cuda(0)}, from);
      else
        gpu_from_precision_bits(stream_, dw, static_cast<const std::uint16_t*>(narrow), nw,
                                precision_);
      return;
    }
    float* back = accumulate ? filter_scratch() : dw;
    gpu_transpose_batched(stream_, from, BufferView{back, nw, DType::f32, Device::cuda(0)},
                          g_.out_channels, g_.kh() * g_.kw(), g_.in_channels);
    if (accumulate) gpu_axpy(stream_, 1.0f, back, dw, nw);
  }

  bool nhwc() const { return g_.layout == Layout::nhwc; }
  cudnnTensorFormat_t format() const { return nhwc() ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW; }
  // The filter cuDNN reads: w itself, or (NHWC) its [K, R, S, C] copy, made now.
  const float* filter_for_layout(const float* w) {
    if (!nhwc()) return w;
    float* copy = filter_krsc();
    gpu_transpose_batched(stream_, w, copy, g_.out_channels, g_.in_channels, g_.kh() * g_.kw());
    return copy;
  }
  std::size_t in_elements() const { return g_.in_channels * g_.height * g_.width; }
  std::size_t out_elements() const { return g_.out_channels * g_.out_height() * g_.out_width(); }
  std::size_t weight_elements() const {
    return g_.out_channels * g_.in_channels * g_.kh() * g_.kw();
  }
  std::size_t weight_bytes() const { return sizeof(float) * weight_elements(); }
  // The context's filter-sized fp32 scratch, within one call (WideningScratch
  // buffers 2 and 3): a weight gradient beside dw (and Find's output for a
  // later batch size), and a channels-last [K, R, S, C] filter or weight
  // gradient. Fetched per call: another plan's call may have grown them.
  float* filter_scratch() const { return gpu_widening_buffer(*handles_, 2, weight_elements()); }
  float* filter_krsc() const { return gpu_widening_buffer(*handles_, 3, weight_elements()); }

  // The descriptor Find runs on: PyTorch's choice for float data (DEFAULT
  // allows TF32), and TENSOR_OP for 16-bit data, as PyTorch sets it. DEFAULT
  // does not admit tensor cores for bf16/fp16: on an H200 cuDNN's heuristics
  // then ranked kernels that widen x and y to fp32 in the workspace (its size
  // was exactly their fp32 bytes), 10x slower forward and 100x slower backward
  // data than TF32 (resnet50 bf16 at 58 img/s, 2026-11-26).
  cudnnConvolutionDescriptor_t find_conv(bool half = false) const {
    const cudnnMathType_t m = half    ? CUDNN_TENSOR_OP_MATH
                              : tf32_ ? CUDNN_DEFAULT_MATH
                                      : CUDNN_FMA_MATH;
    return conv_[static_cast<std::size_t>(m)];
  }
  cudnnConvolutionDescriptor_t conv_for(cudnnMathType_t m) const {
    return conv_[static_cast<std::size_t>(m)];
  }

  Entry& entry(std::size_t batch) {
    for (Entry& e : entries_)
      if (e.batch == batch) return e;
    return add_entry(batch);
  }

  Entry& add_entry(std::size_t batch) {
    entries_.push_back(Entry{});
    Entry& e = entries_.back();
    e.batch = batch;
    RT_CUDNN_CHECK(cudnnCreateTensorDescriptor(&e.x));
    RT_CUDNN_CHECK(cudnnCreateTensorDescriptor(&e.y));
    RT_CUDNN_CHECK(cudnnSetTensor4dDescriptor(e.x, format(), CUDNN_DATA_FLOAT, i(batch),
                                              i(g_.in_channels), i(g_.height), i(g_.width)));
    RT_CUDNN_CHECK(cudnnSetTensor4dDescriptor(e.y, format(), CUDNN_DATA_FLOAT, i(batch),
                                              i(g_.out_channels), i(g_.out_height()),
                                              i(g_.out_width())));
    if (sixteen_bit()) {
      RT_CUDNN_CHECK(cudnnCreateTensorDescriptor(&e.x16));
      RT_CUDNN_CHECK(cudnnCreateTensorDescriptor(&e.y16));
      RT_CUDNN_CHECK(cudnnSetTensor4dDescriptor(e.x16, format(), data16(), i(batch),
                                                i(g_.in_channels), i(g_.height), i(g_.width)));
      RT_CUDNN_CHECK(cudnnSetTensor4dDescriptor(e.y16, format(), data16(), i(batch),
                                                i(g_.out_channels), i(g_.out_height()),
                                                i(g_.out_width())));
    }
    return e;
  }

  // The maximum batch: all three operations measured on zeroed scratch
  // buffers with a trial workspace, then the workspace sized for the choices.
  void plan_max_batch(Entry& e) {
    // Find's scratch operands; the heuristics read none.
    const auto scratch = [](std::size_t bytes) {
      return kMeasureAlgorithms ? DeviceBytes(bytes) : DeviceBytes();
    };
    const DeviceBytes x = scratch(sizeof(float) * e.batch * in_elements());
    const DeviceBytes y = scratch(sizeof(float) * e.batch * out_elements());
    const DeviceBytes w = scratch(weight_bytes());
    for (const DeviceBytes* b : {&x, &y, &w})
      if (b->size() > 0) RT_CUDA_CHECK(cudaMemsetAsync(b->get(), 0, b->size(), stream_));
    const DeviceBytes trial = DeviceBytes::trial_workspace();
    std::string tried;
    // An fp32 context runs these algorithms every step: chosen by time where
    // timing is wanted (a 16-bit context runs its graph engines instead).
    LegacyTrial legacy;
    LegacyTrial* timed = nullptr;
    if (!kMeasureAlgorithms && !sixteen_bit() && conv_engine_timing_wanted() &&
        !stream_is_capturing(stream_)) {
      legacy.x_bytes = sizeof(float) * e.batch * in_elements();
      legacy.y_bytes = sizeof(float) * e.batch * out_elements();
      legacy.w_bytes = weight_bytes();
      legacy.stream = stream_;
      legacy.key =
          ConvGraphCache::shape_key(graph_shape(e.batch), tf32_ ? "tf32" : "fma", /*graph=*/false);
      timed = &legacy;
    }
    e.fwd = find_forward(e, false, x.get(), w.get(), y.get(), trial, &tried, timed);
    require(e.fwd, "forward", e.batch, trial.size(), tried);
    e.bwd_filter = find_backward_filter(e, x.get(), y.get(), w.get(), trial, &tried, timed);
    require(e.bwd_filter, "backward-filter", e.batch, trial.size(), tried);
    e.bwd_data = find_backward_data(e, false, w.get(), y.get(), x.get(), trial, &tried, timed);
    require(e.bwd_data, "backward-data", e.batch, trial.size(), tried);
    if (timed != nullptr) RT_CUDA_CHECK(cudaStreamSynchronize(stream_));  // before it is freed
    if (sixteen_bit()) {
      // The fp32 scratch buffers are larger than the 16-bit tensors (used
      // only when Find measures).
      // Where cuDNN offers no deterministic 16-bit algorithm for this shape,
      // that operation stays on the fp32 path, which rounds its output: the
      // same numbers (its inputs are on the grid), without tensor cores.
      e.fwd16 = find_forward(e, true, x.get(), w.get(), y.get(), trial, nullptr);
      e.bwd_data16 = find_backward_data(e, true, w.get(), y.get(), x.get(), trial, nullptr);
      forward16_ = e.fwd16.has_value();
      backward_data16_ = e.bwd_data16.has_value();
      // The graphs run on the stored path alone; their candidate engines
      // are timed on trial operands of this batch (freed on return).
      if (stores_16bit()) {
        TrialOperands operands;
        operands.x_bytes = e.batch * in_elements() * dtype_size(precision_);
        operands.y_bytes = e.batch * out_elements() * dtype_size(precision_);
        operands.dw_bytes = weight_bytes();
        operands.dtype = precision_;
        operands.w16 = w16_.get();
        operands.stream = stream_;
        plan_wgrad16(e, false, &operands);
        plan_data16(e, false, &operands);
        RT_CUDA_CHECK(cudaStreamSynchronize(stream_));  // before the operands are freed
      }
    }
    fit_workspace(stored_workspace_need(e));
  }

  // The shared workspace a step of e's batch needs: what its calls run. A
  // storing plan runs the graph API's engines, else the legacy 16-bit
  // algorithms, and fp32 only for a weight gradient without a graph; a plan
  // that does not store runs the fp32 algorithms. (ResNet-50's fp32
  // backward-filter choices at b256 ask for up to about 1.2 GiB, which a bf16
  // step with weight-gradient graphs never touches.) An fp32 call of a
  // storing plan grows it on its first run.
  std::size_t stored_workspace_need(const Entry& e) const {
    if (!stores_16bit()) return std::max({e.fwd->memory, e.bwd_filter->memory, e.bwd_data->memory});
    const std::size_t fwd = e.fwd_graph ? e.fwd_graph->workspace_bytes() : e.fwd16->memory;
    const std::size_t dgrad =
        e.dgrad_graph ? e.dgrad_graph->workspace_bytes() : e.bwd_data16->memory;
    const std::size_t wgrad = e.wgrad16 ? e.wgrad16->workspace_bytes() : e.bwd_filter->memory;
    return std::max({fwd, dgrad, wgrad});
  }

  // A later batch size (see the file's comment): by the heuristics, within
  // the trial size, and the workspace grown to fit; measuring, within the
  // workspace, failing that with a trial workspace, which then replaces a
  // grown workspace.
  template <typename Find>
  Choice choose_later(const char* op, std::size_t batch, Find&& find) {
    std::string tried;
    if (!kMeasureAlgorithms) {
      // The caller grows the workspace for it (fit_choice).
      const DeviceBytes trial = DeviceBytes::trial_workspace();
      const std::optional<Choice> c = find(trial, &tried);
      require(c, op, batch, trial.size(), tried);
      return *c;
    }
    if (std::optional<Choice> c = find(workspace_, &tried)) return *c;
    DeviceBytes trial = DeviceBytes::trial_workspace();
    std::size_t limit = workspace_.size();
    if (trial.size() > workspace_.size()) {
      limit = trial.size();
      if (std::optional<Choice> c = find(trial, &tried)) {
        trial = DeviceBytes();
        replace_workspace(std::max(c->memory, workspace_.size()));
        return *c;
      }
    }
    require(std::optional<Choice>{}, op, batch, limit, tried);
    __builtin_unreachable();
  }

  void require(const std::optional<Choice>& c, const char* op, std::size_t batch, std::size_t limit,
               const std::string& tried) const {
    RT_CHECK(c.has_value(),
             "conv2d {}x{}x{} -> {} (kernel {}x{}, stride {}x{}, padding {}x{}), batch {}: no "
             "{}cuDNN {} "
             "algorithm "
             "within a {:.1f} MiB workspace{}; cuDNN measured: {}",
             g_.in_channels, g_.height, g_.width, g_.out_channels, g_.kh(), g_.kw(), g_.sh(),
             g_.sw(), g_.ph(), g_.pw(), batch, kDeterministicOnly ? "deterministic " : "", op,
             static_cast<double>(limit) / (1 << 20),
             tf32_ || std::string_view(op).starts_with("16-bit") ? "" : " with FMA math (TF32 off)",
             tried);
  }

  // One Find: `run(workspace, bytes, requested, &returned, perf)`, then the rules.
  // `tensor_math`: results on tensor cores may be taken (TF32 on, or 16-bit data).
  // `timed` (an fp32 context's maximum batch): the allowed results timed
  // with launch(trial, algo, math descriptor, workspace, bytes), as the
  // LegacyTrial comment says.
  template <typename Perf, int kCount, typename Run>
  std::optional<Choice> measure(ConvAlgoOp op, const DeviceBytes& ws, std::string* tried,
                                bool tensor_math, Run&& run, LegacyTrial* timed = nullptr,
                                const std::function<void(LegacyTrial&, int, cudnnMathType_t, void*,
                                                         std::size_t)>& launch = {}) const {
    std::array<Perf, kCount> perf{};
    int returned = 0;
    run(ws.get(), ws.size(), kCount, &returned, perf.data());
    returned = std::clamp(returned, 0, kCount);
    std::array<ConvAlgoRecord, kCount> records{};
    // Heuristic results come best first with no time: their rank stands in.
    for (int r = 0; r < returned; ++r)
      records[static_cast<std::size_t>(r)] = {
          static_cast<int>(perf[r].algo),
          perf[r].status == CUDNN_STATUS_SUCCESS,
          perf[r].determinism == CUDNN_DETERMINISTIC,
          perf[r].memory,
          kMeasureAlgorithms ? perf[r].time : static_cast<float>(r),
          math_of(perf[r].mathType)};
    const std::span<const ConvAlgoRecord> found(records.data(), static_cast<std::size_t>(returned));
    const ConvAlgoRules rules{std::min(ws.size(), kWorkspaceCap), kDeterministicOnly, tensor_math};
    std::optional<std::size_t> pick = choose_conv_algorithm(found, rules);
    if (!pick) {
      if (tried != nullptr) *tried = describe_conv_algorithms(found);
      return std::nullopt;
    }
    std::string how;
    if (timed != nullptr) {
      if (const std::optional<std::size_t> t =
              timed_pick(op, found, rules, perf.data(), *timed, launch, &how))
        pick = t;
    }
    const Perf& p = perf[*pick];
    return Choice{static_cast<int>(p.algo), p.mathType, p.memory,
                  describe_passed_over(op, found, *pick, rules), std::move(how)};
  }

  // The timed (or remembered) choice among the results the rules allow;
  // nullopt (the heuristics' pick stands) where none could be timed.
  template <typename Perf>
  std::optional<std::size_t> timed_pick(
      ConvAlgoOp op, std::span<const ConvAlgoRecord> found, const ConvAlgoRules& rules,
      const Perf* perf, LegacyTrial& trial,
      const std::function<void(LegacyTrial&, int, cudnnMathType_t, void*, std::size_t)>& launch,
      std::string* how) const {
    // cuDNN's order; no FFT or Winograd brought in under --tf32 off.
    std::vector<std::size_t> allowed = conv_algorithms_to_time(op, found, rules, !tf32_);
    if (allowed.size() < 2) return std::nullopt;
    const auto name = [&](std::size_t r) {
      return fmt::format("{} {}", conv_algo_name(op, found[r].algo),
                         static_cast<int>(perf[r].mathType));
    };
    const char* what = op == ConvAlgoOp::forward           ? "legacy-fprop"
                       : op == ConvAlgoOp::backward_filter ? "legacy-wgrad"
                                                           : "legacy-dgrad";
    const auto started = std::chrono::steady_clock::now();
    std::optional<std::size_t> pick;
    conv_engine_record().decide(
        fmt::format("{}|{} {}", engine_record_device(), what, trial.key),
        [&](const std::optional<std::string>& kept) -> std::string {
          if (kept)
            for (const std::size_t r : allowed)
              if (name(r) == *kept) {
                pick = r;
                *how = "remembered";
                return *kept;
              }
          if (allowed.size() > kCandidatesTimed) allowed.resize(kCandidatesTimed);
          std::vector<std::size_t> need;
          for (const std::size_t r : allowed) need.push_back(found[r].memory);
          const std::size_t most = *std::max_element(need.begin(), need.end());
          if (!trial.ready()) {
            *how = "the heuristics' first (no room on the GPU to time the others)";
            return {};
          }
          const DeviceBytes ws = DeviceBytes::up_to(most, std::min(most, kMinTrialWorkspace));
          const std::vector<float> ms =
              time_candidates(stream_, need, ws.size(), [&](std::size_t i) {
                const Perf& p = perf[allowed[i]];
                launch(trial, static_cast<int>(p.algo), p.mathType, ws.get(), ws.size());
              });
          const std::optional<std::size_t> c = choose_by_time(ms, need, kTimingTie);
          std::vector<std::string> names;
          for (const std::size_t r : allowed) names.push_back(name(r));
          note_candidate_times(fmt::format("{} {}", what, trial.key), names, ms, need,
                               c.value_or(names.size()));
          if (!c) return {};
          pick = allowed[*c];
          *how = timed_choice_note(
              ms, *c,
              std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
          return name(*pick);
        });
    return pick;
  }

  // half: on the entry's 16-bit descriptors.
  std::optional<Choice> find_forward(const Entry& e, bool half, const void* x, const void* w,
                                     void* y, const DeviceBytes& ws, std::string* tried,
                                     LegacyTrial* timed = nullptr) const {
    const cudnnTensorDescriptor_t xd = half ? e.x16 : e.x, yd = half ? e.y16 : e.y;
    const cudnnFilterDescriptor_t wd = half ? w16_desc_ : w_desc_;
    return measure<cudnnConvolutionFwdAlgoPerf_t, CUDNN_CONVOLUTION_FWD_ALGO_COUNT>(
        ConvAlgoOp::forward, ws, tried, tf32_ || half,
        [&](void* space, std::size_t bytes, int n, int* returned,
            cudnnConvolutionFwdAlgoPerf_t* perf) {
          if (!kMeasureAlgorithms) {
            RT_CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithm_v7(dnn_, xd, wd, find_conv(half), yd,
                                                                  n, returned, perf));
            return;
          }
          RT_CUDNN_CHECK(cudnnFindConvolutionForwardAlgorithmEx(
              dnn_, xd, x, wd, w, find_conv(half), yd, y, n, returned, perf, space, bytes));
        },
        half ? nullptr : timed,
        [&](LegacyTrial& t, int algo, cudnnMathType_t math, void* space, std::size_t bytes) {
          const float one = 1.0f, zero = 0.0f;
          RT_CUDNN_CHECK(cudnnConvolutionForward(
              dnn_, &one, e.x, t.x.get(), w_desc_, t.w.get(), conv_for(math),
              static_cast<cudnnConvolutionFwdAlgo_t>(algo), space, bytes, &zero, e.y, t.y.get()));
        });
  }

  std::optional<Choice> find_backward_filter(const Entry& e, const void* x, const void* dy,
                                             void* dw, const DeviceBytes& ws, std::string* tried,
                                             LegacyTrial* timed = nullptr) const {
    return measure<cudnnConvolutionBwdFilterAlgoPerf_t, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT>(
        ConvAlgoOp::backward_filter, ws, tried, tf32_,
        [&](void* space, std::size_t bytes, int n, int* returned,
            cudnnConvolutionBwdFilterAlgoPerf_t* perf) {
          if (!kMeasureAlgorithms) {
            RT_CUDNN_CHECK(cudnnGetConvolutionBackwardFilterAlgorithm_v7(
                dnn_, e.x, e.y, find_conv(), w_desc_, n, returned, perf));
            return;
          }
          RT_CUDNN_CHECK(cudnnFindConvolutionBackwardFilterAlgorithmEx(
              dnn_, e.x, x, e.y, dy, find_conv(), w_desc_, dw, n, returned, perf, space, bytes));
        },
        timed,
        [&](LegacyTrial& t, int algo, cudnnMathType_t math, void* space, std::size_t bytes) {
          const float one = 1.0f, zero = 0.0f;
          RT_CUDNN_CHECK(cudnnConvolutionBackwardFilter(
              dnn_, &one, e.x, t.x.get(), e.y, t.y.get(), conv_for(math),
              static_cast<cudnnConvolutionBwdFilterAlgo_t>(algo), space, bytes, &zero, w_desc_,
              t.dw.get()));
        });
  }

  std::optional<Choice> find_backward_data(const Entry& e, bool half, const void* w, const void* dy,
                                           void* dx, const DeviceBytes& ws, std::string* tried,
                                           LegacyTrial* timed = nullptr) const {
    const cudnnTensorDescriptor_t xd = half ? e.x16 : e.x, yd = half ? e.y16 : e.y;
    const cudnnFilterDescriptor_t wd = half ? w16_desc_ : w_desc_;
    return measure<cudnnConvolutionBwdDataAlgoPerf_t, CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT>(
        ConvAlgoOp::backward_data, ws, tried, tf32_ || half,
        [&](void* space, std::size_t bytes, int n, int* returned,
            cudnnConvolutionBwdDataAlgoPerf_t* perf) {
          if (!kMeasureAlgorithms) {
            RT_CUDNN_CHECK(cudnnGetConvolutionBackwardDataAlgorithm_v7(
                dnn_, wd, yd, find_conv(half), xd, n, returned, perf));
            return;
          }
          RT_CUDNN_CHECK(cudnnFindConvolutionBackwardDataAlgorithmEx(
              dnn_, wd, w, yd, dy, find_conv(half), xd, dx, n, returned, perf, space, bytes));
        },
        half ? nullptr : timed,
        [&](LegacyTrial& t, int algo, cudnnMathType_t math, void* space, std::size_t bytes) {
          const float one = 1.0f, zero = 0.0f;
          RT_CUDNN_CHECK(cudnnConvolutionBackwardData(
              dnn_, &one, w_desc_, t.w.get(), e.y, t.y.get(), conv_for(math),
              static_cast<cudnnConvolutionBwdDataAlgo_t>(algo), space, bytes, &zero, e.x,
              t.x.get()));
        });
  }

  void release() noexcept {
    for (Entry& e : entries_)
      for (cudnnTensorDescriptor_t d : {e.y16, e.x16, e.y, e.x})
        if (d != nullptr) (void)cudnnDestroyTensorDescriptor(d);
    entries_.clear();
    for (cudnnConvolutionDescriptor_t& d : conv_)
      if (d != nullptr) (void)cudnnDestroyConvolutionDescriptor(std::exchange(d, nullptr));
    if (w_desc_ != nullptr) (void)cudnnDestroyFilterDescriptor(std::exchange(w_desc_, nullptr));
    if (w16_desc_ != nullptr) (void)cudnnDestroyFilterDescriptor(std::exchange(w16_desc_, nullptr));
  }

  cudnnHandle_t dnn_;
  cudaStream_t stream_;
  Conv2dGeometry g_;
  bool tf32_;
  // The context (for its widening scratch) and its precision.
  const GpuHandles* handles_;
  DType precision_;
  // Whether forward and backward data run on 16-bit tensors: under bf16/fp16,
  // where cuDNN has a deterministic 16-bit algorithm at the maximum batch.
  bool forward16_ = false, backward_data16_ = false;
  cudnnFilterDescriptor_t w_desc_ = nullptr, w16_desc_ = nullptr;
  // Indexed by cudnnMathType_t; the ALLOW_CONVERSION slot stays empty.
  std::array<cudnnConvolutionDescriptor_t, 4> conv_{};
  std::vector<Entry> entries_;
  DeviceBytes& workspace_;  // shared by the context's convolutions (GpuHandles)
  // The stored path's 16-bit filter (refresh_weights16), and whether a
  // forward has made it.
  DeviceBytes w16_;
  bool w16_fresh_ = false;
};

}  // namespace

std::shared_ptr<void> make_conv_workspace() {
  return std::make_shared<DeviceBytes>();
}

std::shared_ptr<void> make_conv_graph_cache() {
  return std::make_shared<ConvGraphCache>();
}

std::size_t conv_graphs_built(const GpuHandles& h) {
  const ConvGraphCache& cache = conv_graphs_of(h);
  return cache.data.size() + cache.wgrad.size();
}

void release_conv_graphs(const GpuHandles& h) noexcept {
  if (h.conv_graphs == nullptr) return;
  auto& cache = *static_cast<ConvGraphCache*>(h.conv_graphs.get());
  cache.data.clear();
  cache.wgrad.clear();
}

std::unique_ptr<GpuConvPlan> make_gpu_conv_plan(const GpuHandles& h, const Conv2dGeometry& g,
                                                std::size_t max_batch) {
  return std::make_unique<CudnnConvPlan>(h, g, max_batch);
}

}  // namespace ringtrain::detail
