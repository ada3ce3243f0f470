// cuDNN's graph API: a convolution's weight gradient from 16-bit x and dy into
// an fp32 dW on tensor cores (which the legacy API cannot do), its forward and
// backward data on 16-bit tensors with the graph API's engine choice, and
// causal attention as one fused flash-attention graph (SDPA) on tensor cores. Built
// through NVIDIA's header-only cudnn-frontend, which only
// src/ops/cuda/cudnn_graph.cpp includes (the headers are large and pinned:
// launch/install-deps.sh unpacks them into deps/). Nothing here names a
// cudnn-frontend or CUDA type, so callers compile in any build; a CPU-only
// build answers "not available" (cudnn_graph_nocuda.cpp).
//
// Each graph is built for one shape on first use (host-blocking, once: cuDNN's
// heuristics rank the engines, the first that the device supports and that is
// deterministic is built) and then only launched: no query, no allocation.
// The convolutions can also list several deterministic engines of a shape in
// the heuristics' order (candidates), for the caller to time and choose
// among (ops/cuda/conv_engine_choice.h).
// A context's layers of one shape share the graphs (attention's and the
// convolutions' caches).
// Where no engine qualifies, the caller keeps its own path, and says which ran.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "ringtrain/core/dtype.h"

namespace ringtrain::detail {

struct GpuHandles;

// A convolution with x [N, C, H, W] and y [N, K, P, Q] of the 16-bit `dtype`,
// in NCHW or (nhwc) NHWC memory order, and its filter [K, C, R, S]; fp32
// accumulation.
struct ConvGraphShape {
  std::size_t n = 0, c = 0, h = 0, w = 0, k = 0, r = 0, s = 0, p = 0, q = 0;
  std::size_t pad_h = 0, pad_w = 0, stride_h = 1, stride_w = 1;
  bool nhwc = false;
  DType dtype = DType::bf16;
  auto tie() const {
    return std::tie(n, c, h, w, k, r, s, p, q, pad_h, pad_w, stride_h, stride_w, nhwc, dtype);
  }
  bool operator<(const ConvGraphShape& o) const { return tie() < o.tie(); }
};

// Which engines a convolution's candidates() builds: up to `most`, in the
// heuristics' order, and where `only` names one (a remembered choice), only
// that one: the others are neither built nor compiled.
struct EngineWanted {
  std::size_t most = 1;
  std::string only;
};

// The weight gradient: dW [K, C, R, S] = conv_wgrad(x, dy), in fp32, or in
// the data's 16-bit dtype (autocast's dW, which the caller widens as it adds
// it into the fp32 gradient).
class ConvWgradGraph {
 public:
  // The fp32-dW graph of cuDNN's first deterministic engine; nullptr where
  // none on this device runs the shape (or in a CPU-only build); *why_not
  // then says why.
  static std::unique_ptr<ConvWgradGraph> build(const GpuHandles& h, const ConvGraphShape& shape,
                                               std::string* why_not);
  // The deterministic engines `wanted` for each dW memory order, with dW of
  // `dw_dtype` (f32 or shape.dtype), in the heuristics' order: the first is
  // build()'s for f32. Empty (and *why_not says why) where there is none.
  static std::vector<std::unique_ptr<ConvWgradGraph>> candidates(const GpuHandles& h,
                                                                 const ConvGraphShape& shape,
                                                                 DType dw_dtype,
                                                                 const EngineWanted& wanted,
                                                                 std::string* why_not);
  virtual ~ConvWgradGraph() = default;
  // dW's memory order: [K, C, R, S] (the model's), or [K, R, S, C] where only
  // a channels-last filter gradient has an engine (the caller transposes).
  virtual bool writes_kcrs() const = 0;
  // f32, or the data's 16-bit dtype.
  virtual DType dw_dtype() const = 0;
  virtual std::size_t workspace_bytes() const = 0;
  // Launches on h's stream; dw (of dw_dtype) is overwritten.
  virtual void run(const GpuHandles& h, const void* x, const void* dy, void* dw,
                   void* workspace) const = 0;
  // The engine and its knobs, as cuDNN names them.
  virtual std::string engine() const = 0;
};

// Forward, y = conv(x, w), or backward data, dx = conv_transpose(dy, w): every
// tensor of the 16-bit dtype, the filter in the data's memory order ([K, C, R,
// S] for NCHW, [K, R, S, C] for NHWC: the stored convolution's 16-bit copy).
enum class ConvDataOp { forward, backward_data };

class ConvDataGraph {
 public:
  // nullptr where no deterministic engine on this device runs it (or in a
  // CPU-only build); *why_not then says why.
  static std::unique_ptr<ConvDataGraph> build(const GpuHandles& h, const ConvGraphShape& shape,
                                              ConvDataOp op, std::string* why_not);
  // The deterministic engines `wanted`, in the heuristics' order (the first
  // is build()'s). Empty (and *why_not says why) where there is none.
  static std::vector<std::unique_ptr<ConvDataGraph>> candidates(const GpuHandles& h,
                                                                const ConvGraphShape& shape,
                                                                ConvDataOp op,
                                                                const EngineWanted& wanted,
                                                                std::string* why_not);
  virtual ~ConvDataGraph() = default;
  virtual std::size_t workspace_bytes() const = 0;
  // Launches on h's stream: forward reads x (`in`) and writes y (`out`),
  // backward data reads dy and writes dx; `out` is overwritten.
  virtual void run(const GpuHandles& h, const void* in, const void* w, void* out,
                   void* workspace) const = 0;
  virtual std::string engine() const = 0;
};

// The heuristics mode the convolutions' engines are listed by
// (RINGTRAIN_CONV_HEUR): part of a remembered choice's key, since another
// mode lists other candidates.
const char* conv_heuristics_mode_name();

// Causal scaled-dot-product attention over the fused qkv rows of
// causal_self_attention ([batch, T, 3C] of the 16-bit `dtype`, Q at column
// h*d, K at C + h*d, V at 2C + h*d): o [batch, T, C] of `dtype` and each
// row's log-sum-exp stats [batch, heads, T] fp32 (training) forward;
// d_qkv [batch, T, 3C] of `dtype` from d_o, o, stats backward (deterministic
// engines only). Scale 1/sqrt(d), no dropout.
struct AttentionShape {
  std::size_t batch = 0, t = 0, c = 0, heads = 0;
  DType dtype = DType::bf16;
};

class AttentionGraphs {
 public:
  // nullptr where cuDNN has no engine for the forward (training: with stats)
  // and the backward of this shape on this device, or in a CPU-only build.
  static std::unique_ptr<AttentionGraphs> build(const GpuHandles& h, const AttentionShape& shape,
                                                std::string* why_not);
  virtual ~AttentionGraphs() = default;
  virtual std::size_t workspace_bytes() const = 0;
  virtual void forward(const GpuHandles& h, const void* qkv, void* o, float* stats,
                       void* workspace) const = 0;
  virtual void backward(const GpuHandles& h, const void* qkv, const void* o, const void* d_o,
                        const float* stats, void* d_qkv, void* workspace) const = 0;
  virtual std::string engine() const = 0;
};

}  // namespace ringtrain::detail
