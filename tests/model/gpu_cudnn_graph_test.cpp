// cuDNN's graph API on the GPU (ops/cudnn_graph.h): the convolution forward
// and backward data on 16-bit tensors and the weight gradient from 16-bit x
// and dy (fp32 dW), NCHW and NHWC, against double-precision loops over the
// same 16-bit values; causal attention through
// cuDNN's SDPA (the attention layer's automatic choice under bf16/fp16
// without dropout) against the CPU layer in fp32, within 16-bit tolerance,
// and repeating bit for bit; the layer's stored path (16-bit x, y, dy, dx)
// against its fp32 interface on the device. Exits 77 (ctest: skipped) without CUDA or a
// device.
#define CATCH_CONFIG_RUNNER
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <string_view>
#include <vector>

#include "kernels/precision.cuh"
#include "kernels/trial_pattern.cuh"
#include "kernels/trial_pattern.h"
#include "model/causal_self_attention_layer.h"
#include "ops/cuda/gpu_gemm_wgrad.h"
#include "ops/cudnn_graph.h"
#include "ops/gpu_ops.h"
#include "ops/wgrad_spot_check.h"
#include "ringtrain/core/error.h"
#include "ringtrain/ops/compute_context.h"
#include "ringtrain/ops/conv2d.h"
#include "ringtrain/ops/precision.h"
#include "ringtrain/tensor/device_memory.h"
#include "ringtrain/tensor/tensor.h"
#include "tests/model/grid_values.h"
#include "tests/model/test_data.h"
#include "tests/model/wgrad_reference.h"
#include "tests/support/gpu_compare.h"
#include "tests/support/gpu_test.h"

using namespace ringtrain;
using namespace ringtrain::test;

namespace {

// A strided, padded 3x3 convolution with odd extents.
detail::ConvGraphShape small_conv(DType p, bool nhwc) {
  detail::ConvGraphShape s;
  s.n = 3, s.c = 16, s.h = 9, s.w = 7, s.k = 32, s.r = 3, s.s = 3;
  s.pad_h = 1, s.pad_w = 1, s.stride_h = 2, s.stride_w = 1;
  s.p = (s.h + 2 * s.pad_h - s.r) / s.stride_h + 1;
  s.q = (s.w + 2 * s.pad_w - s.s) / s.stride_w + 1;
  s.nhwc = nhwc;
  s.dtype = p;
  return s;
}

// An NHWC convolution of a square filter, [4, c, 12, 10] in, 32 out: the
// GEMM weight gradients' test shapes.
struct GemmShape {
  std::size_t r, pad, stride, c = 16;
};
detail::ConvGraphShape gemm_conv(const GemmShape& g, DType p) {
  return test::nhwc_conv(4, g.c, 12, 10, 32, g.r, g.r, g.pad, g.pad, g.stride, g.stride, p);
}

// Whether an Error from a GEMM candidate is a refusal cuBLASLt may rightly
// make (which the timing passes over): "no algorithm", for a rank past the
// heuristic's first or a form whose operands are not all 16-byte aligned
// (shifted rows 2 C bytes apart: gemm_wgrad_sure keeps a plan from running
// those untried).
bool gemm_may_be_refused(const detail::ConvGraphShape& s, const detail::ConvWgradGraph& g,
                         const Error& e) {
  return std::string_view(e.what()).find("cuBLASLt has no algorithm") != std::string_view::npos &&
         detail::names_gemm_wgrad(g.engine()) && !detail::gemm_wgrad_sure(s, g);
}

// Runs a weight-gradient engine twice on x and dy (on the GPU), dW
// `offset` floats into its buffer and everything it writes or reads NaN
// first (a reused workspace holds anything; every element of dW must be
// written): the first run's dW, and the second's, for the same bits.
struct TwoRuns {
  std::vector<float> first, again;
};
TwoRuns run_twice(const ComputeContext& ctx, const detail::ConvWgradGraph& g, const Tensor& gx,
                  const Tensor& gdy, std::size_t dw_count, std::size_t offset = 0) {
  const auto nan_tensor = [](std::size_t floats) {
    std::vector<float> nan(floats, std::nanf(""));
    Tensor t = Tensor::empty({floats}, DType::f32, kGpu);
    t.copy_from(Tensor::borrow(nan.data(), {floats}, DType::f32, Device::cpu()));
    return t;
  };
  Tensor gdw = nan_tensor(dw_count + offset);
  Tensor ws = nan_tensor(g.workspace_bytes() / 4 + 1);
  float* dw = gdw.data_as<float>() + offset;
  const auto run = [&] {
    g.run(detail::handles_of(ctx), gx.data(), gdy.data(), dw, ws.data());
    const std::vector<float> all = to_host(gdw, ctx);
    return std::vector<float>(all.begin() + static_cast<std::ptrdiff_t>(offset), all.end());
  };
  TwoRuns runs;
  runs.first = run();
  runs.again = run();
  return runs;
}

}  // namespace

TEST_CASE("gpu conv forward and backward data through the graph API: 16-bit in and out",
          "[gpu][cudnn_graph]") {
  for (DType p : {DType::bf16, DType::f16}) {
    for (bool nhwc : {false, true}) {
      CAPTURE(dtype_name(p), nhwc);
      auto ctx = ComputeContext::create(kGpu, Tf32Mode::off, p);
      const detail::ConvGraphShape s = small_conv(p, nhwc);
      std::string fwd_why, dgrad_why;
      auto fwd = detail::ConvDataGraph::build(detail::handles_of(*ctx), s,
                                              detail::ConvDataOp::forward, &fwd_why);
      auto dgrad = detail::ConvDataGraph::build(detail::handles_of(*ctx), s,
                                                detail::ConvDataOp::backward_data, &dgrad_why);
      INFO("why not: " << fwd_why << " / " << dgrad_why);
      REQUIRE(fwd != nullptr);
      REQUIRE(dgrad != nullptr);
      INFO("engines: " << fwd->engine() << " / " << dgrad->engine());
      const auto x = on_grid(test::hashed_vector(3, s.n * s.c * s.h * s.w), p);
      const auto w = on_grid(test::hashed_vector(4, s.k * s.c * s.r * s.s), p);
      const auto dy = on_grid(test::hashed_vector(5, s.n * s.k * s.p * s.q), p);
      const auto at = [&](auto... i) { return index_in(nhwc, i...); };
      // The filter in the data's memory order ([K, R, S, C] for NHWC).
      const auto wat = [&](std::size_t k, std::size_t c, std::size_t r, std::size_t t) {
        return nhwc ? ((k * s.r + r) * s.s + t) * s.c + c : ((k * s.c + c) * s.r + r) * s.s + t;
      };
      std::vector<double> y(dy.size()), ym(dy.size()), dx(x.size()), dxm(x.size());
      for (std::size_t n = 0; n < s.n; ++n)
        for (std::size_t k = 0; k < s.k; ++k)
          for (std::size_t i = 0; i < s.p; ++i)
            for (std::size_t j = 0; j < s.q; ++j)
              for (std::size_t c = 0; c < s.c; ++c)
                for (std::size_t r = 0; r < s.r; ++r)
                  for (std::size_t t = 0; t < s.s; ++t) {
                    const long h = static_cast<long>(i * s.stride_h + r) - long(s.pad_h);
                    const long v = static_cast<long>(j * s.stride_w + t) - long(s.pad_w);
                    if (h < 0 || v < 0 || h >= long(s.h) || v >= long(s.w)) continue;
                    const std::size_t xi = at(n, c, std::size_t(h), std::size_t(v), s.c, s.h, s.w);
                    const std::size_t yi = at(n, k, i, j, s.k, s.p, s.q);
                    const double wv = w[wat(k, c, r, t)];
                    y[yi] += double(x[xi]) * wv;
                    ym[yi] += std::abs(double(x[xi]) * wv);
                    dx[xi] += double(dy[yi]) * wv;
                    dxm[xi] += std::abs(double(dy[yi]) * wv);
                  }
      // One rounding to the 16-bit grid after an fp32 accumulation of exact
      // products: |got - want| <= u16 |want| + (1 + u16) terms 2^-23 sum|products|.
      const double u16 = p == DType::bf16 ? 0x1p-8 : 0x1p-11;
      const auto outside = [&](const std::vector<float>& got, const std::vector<double>& want,
                               const std::vector<double>& magnitude, std::size_t terms) {
        std::size_t wrong = 0;
        for (std::size_t i = 0; i < got.size(); ++i) {
          const double slack = (1 + u16) * double(terms) * 0x1p-23 * magnitude[i];
          wrong += !(std::abs(got[i] - want[i]) <= u16 * std::abs(want[i]) + slack);
        }
        return wrong;
      };
      Tensor gx = words_on(x, p, kGpu), gw = words_on(w, p, kGpu), gdy = words_on(dy, p, kGpu);
      Tensor gy = Tensor::zeros({y.size()}, p, kGpu), gdx = Tensor::zeros({dx.size()}, p, kGpu);
      const std::size_t ws_bytes = std::max(fwd->workspace_bytes(), dgrad->workspace_bytes());
      Tensor ws = Tensor::zeros({ws_bytes / 4 + 1}, DType::f32, kGpu);
      fwd->run(detail::handles_of(*ctx), gx.data(), gw.data(), gy.data(), ws.data());
      dgrad->run(detail::handles_of(*ctx), gdy.data(), gw.data(), gdx.data(), ws.data());
      const auto hy = widened_values(gy, *ctx), hdx = widened_values(gdx, *ctx);
      CHECK(outside(hy, y, ym, s.c * s.r * s.s) == 0);
      CHECK(outside(hdx, dx, dxm, s.k * s.r * s.s) == 0);
      // Deterministic engines: the same bits again.
      fwd->run(detail::handles_of(*ctx), gx.data(), gw.data(), gy.data(), ws.data());
      dgrad->run(detail::handles_of(*ctx), gdy.data(), gw.data(), gdx.data(), ws.data());
      CHECK(widened_values(gy, *ctx) == hy);
      CHECK(widened_values(gdx, *ctx) == hdx);
    }
  }
}

TEST_CASE("gpu conv weight gradient through the graph API: fp32 dW from 16-bit x and dy",
          "[gpu][cudnn_graph]") {
  for (DType p : {DType::bf16, DType::f16}) {
    for (bool nhwc : {false, true}) {
      CAPTURE(dtype_name(p), nhwc);
      auto ctx = ComputeContext::create(kGpu, Tf32Mode::off, p);
      const detail::ConvGraphShape s = small_conv(p, nhwc);
      std::string why;
      auto g = detail::ConvWgradGraph::build(detail::handles_of(*ctx), s, &why);
      // Whether cuDNN has a deterministic engine with an fp32 dW from 16-bit x
      // and dy is the device's answer, not ours: without one the model widens
      // x and dy and runs the fp32 weight gradient (gpu_stored_layers_test
      // checks that path), and the kernels column says "no graph: why".
      if (g == nullptr) {
        WARN("no graph-API weight gradient for " << dtype_name(p) << (nhwc ? " NHWC" : " NCHW")
                                                 << " on this device: " << why);
        continue;
      }
      INFO("engine: " << g->engine());
      const auto x = on_grid(test::hashed_vector(1, s.n * s.c * s.h * s.w), p);
      const auto dy = on_grid(test::hashed_vector(2, s.n * s.k * s.p * s.q), p);
      // The model's [K, C, R, S], or the engine's [K, R, S, C].
      const WgradReference ref = wgrad_reference(s, x, dy, g->writes_kcrs());
      const std::vector<double>& magnitude = ref.magnitude;  // sum |x dy| of each element
      const std::vector<float> want(ref.sum.begin(), ref.sum.end());
      Tensor gx = words_on(x, p, kGpu), gdy = words_on(dy, p, kGpu);
      Tensor gdw = Tensor::zeros({want.size()}, DType::f32, kGpu);
      Tensor ws = Tensor::zeros({g->workspace_bytes() / 4 + 1}, DType::f32, kGpu);
      g->run(detail::handles_of(*ctx), gx.data(), gdy.data(), gdw.data_as<float>(), ws.data());
      const auto first = to_host(gdw, *ctx);
      // An fp32 accumulation of exact products (16-bit x times 16-bit dy),
      // in whatever order and split the engine takes (tensor cores may also
      // truncate their partial sums): |got - want| <= terms 2^-23 sum|x dy|
      // plus want's own rounding to fp32.
      const double terms = double(s.n * s.p * s.q);
      std::size_t outside = 0, first_outside = want.size();
      for (std::size_t i = 0; i < want.size(); ++i) {
        const double bound = terms * 0x1p-23 * magnitude[i] + 0x1p-24 * std::abs(want[i]);
        if (!(std::abs(double(first[i]) - double(want[i])) <= bound)) {
          if (outside++ == 0) first_outside = i;
        }
      }
      INFO(outside << " of " << want.size() << " outside the accumulation bound; the first: ["
                   << first_outside << "] " << (outside > 0 ? first[first_outside] : 0.0f)
                   << " for " << (outside > 0 ? want[first_outside] : 0.0f));
      CHECK(outside == 0);
      g->run(detail::handles_of(*ctx), gx.data(), gdy.data(), gdw.data_as<float>(), ws.data());
      CHECK(to_host(gdw, *ctx) == first);  // deterministic engine
    }
  }
}

TEST_CASE("gpu conv weight gradient candidates: every engine listed, fp32 and 16-bit dW",
          "[gpu][cudnn_graph]") {
  // The engines a plan times (gpu_conv_plan.cpp's ConvGraphCache::choose):
  // each must compute the weight gradient, whichever wins. A 16-bit dW is the
  // fp32 sum rounded once more (autocast's dW), so its bound adds that
  // rounding.
  for (DType p : {DType::bf16, DType::f16}) {
    for (bool nhwc : {false, true}) {
      const detail::ConvGraphShape s = small_conv(p, nhwc);
      auto ctx = ComputeContext::create(kGpu, Tf32Mode::off, p);
      const auto x = on_grid(test::hashed_vector(3, s.n * s.c * s.h * s.w), p);
      const auto dy = on_grid(test::hashed_vector(4, s.n * s.k * s.p * s.q), p);
      const WgradReference ref = wgrad_reference(s, x, dy, /*kcrs=*/true);
      const std::vector<double>&kcrs = ref.sum, &magnitude = ref.magnitude;
      Tensor gx = words_on(x, p, kGpu), gdy = words_on(dy, p, kGpu);
      for (const DType dw_type : {DType::f32, p}) {
        CAPTURE(dtype_name(p), nhwc, dtype_name(dw_type));
        std::string why;
        auto list =
            detail::ConvWgradGraph::candidates(detail::handles_of(*ctx), s, dw_type,
                                               detail::EngineWanted{.most = 4, .only = {}}, &why);
        if (list.empty()) {
          WARN("no " << dtype_name(dw_type) << "-dW weight gradient engine for " << dtype_name(p)
                     << (nhwc ? " NHWC" : " NCHW") << ": " << why);
          continue;
        }
        if (dw_type == DType::f32) {
          // build() is the list's first: what an untimed plan runs.
          std::string build_why;
          auto built = detail::ConvWgradGraph::build(detail::handles_of(*ctx), s, &build_why);
          REQUIRE(built != nullptr);
          CHECK(built->engine() == list.front()->engine());
          CHECK(built->writes_kcrs() == list.front()->writes_kcrs());
        }
        const double unit = dw_type == DType::f32    ? 0x1p-24
                            : dw_type == DType::bf16 ? 0x1p-8
                                                     : 0x1p-11;
        for (const auto& g : list) {
          INFO("engine: " << g->engine() << (g->writes_kcrs() ? " [K,C,R,S]" : " [K,R,S,C]"));
          CHECK(g->dw_dtype() == dw_type);
          Tensor gdw = Tensor::zeros({kcrs.size()}, dw_type, kGpu);
          Tensor ws = Tensor::zeros({g->workspace_bytes() / 4 + 1}, DType::f32, kGpu);
          g->run(detail::handles_of(*ctx), gx.data(), gdy.data(), gdw.data(), ws.data());
          const std::vector<float> got =
              dw_type == DType::f32 ? to_host(gdw, *ctx) : widened_values(gdw, *ctx);
          const double terms = double(s.n * s.p * s.q);
          std::size_t outside = 0;
          for (std::size_t k = 0; k < s.k; ++k)
            for (std::size_t c = 0; c < s.c; ++c)
              for (std::size_t r = 0; r < s.r; ++r)
                for (std::size_t t = 0; t < s.s; ++t) {
                  const std::size_t m = ((k * s.c + c) * s.r + r) * s.s + t;
                  const std::size_t o = g->writes_kcrs() ? m : ((k * s.r + r) * s.s + t) * s.c + c;
                  const double bound = terms * 0x1p-23 * magnitude[m] + unit * std::abs(kcrs[m]) +
                                       unit * terms * 0x1p-23 * magnitude[m];
                  if (!(std::abs(double(got[o]) - kcrs[m]) <= bound)) ++outside;
                }
          CHECK(outside == 0);
          g->run(detail::handles_of(*ctx), gx.data(), gdy.data(), gdw.data(), ws.data());
          const std::vector<float> again =
              dw_type == DType::f32 ? to_host(gdw, *ctx) : widened_values(gdw, *ctx);
          CHECK(again == got);  // deterministic engines only
        }
      }
    }
  }
}

TEST_CASE("gpu conv weight gradient by GEMMs over shifted rows: in place, padded, in chunks",
          "[gpu][cudnn_graph]") {
  // ops/shifted_gemm_wgrad.h's path, which a plan times beside the graph
  // engines: fp32 sums of exact products, each run repeating its bits.
  const auto conv = [](std::size_t c, std::size_t k, std::size_t r, std::size_t t,
                       std::size_t pad_h, std::size_t pad_w, DType p) {
    detail::ConvGraphShape s;
    s.n = 3, s.c = c, s.h = 9, s.w = 7, s.k = k, s.r = r, s.s = t;
    s.pad_h = pad_h, s.pad_w = pad_w;
    s.p = s.h + 2 * pad_h - r + 1;
    s.q = s.w + 2 * pad_w - t + 1;
    s.nhwc = true;
    s.dtype = p;
    return s;
  };
  for (DType p : {DType::bf16, DType::f16}) {
    auto ctx = ComputeContext::create(kGpu, Tf32Mode::off, p);
    struct Case {
      detail::ConvGraphShape s;
      std::size_t cap;
    };
    for (const Case& c : {Case{conv(16, 32, 1, 1, 0, 0, p), detail::kShiftedWgradWorkspaceCap},
                          Case{conv(16, 32, 3, 3, 1, 1, p), detail::kShiftedWgradWorkspaceCap},
                          Case{conv(8, 16, 1, 7, 0, 3, p), detail::kShiftedWgradWorkspaceCap},
                          Case{conv(16, 32, 3, 3, 1, 1, p), 1}}) {  // one image per chunk
      const detail::ConvGraphShape& s = c.s;
      std::string why;
      auto g = detail::make_shifted_gemm_wgrad(s, &why, c.cap);
      REQUIRE(g != nullptr);
      INFO(dtype_name(p) << " " << s.r << "x" << s.s << " engine: " << g->engine());
      CHECK(g->dw_dtype() == DType::f32);
      CHECK(g->writes_kcrs() == (s.r == 1 && s.s == 1));
      const auto x = on_grid(test::hashed_vector(5, s.n * s.c * s.h * s.w), p);
      const auto dy = on_grid(test::hashed_vector(6, s.n * s.k * s.p * s.q), p);
      const WgradReference ref = wgrad_reference(s, x, dy, g->writes_kcrs());
      const Tensor gx = words_on(x, p, kGpu), gdy = words_on(dy, p, kGpu);
      const TwoRuns runs = run_twice(*ctx, *g, gx, gdy, ref.sum.size());
      // Over the padded grid's rows (the padding's terms exact zeros).
      const double terms = double(s.n * (s.h + 2 * s.pad_h) * (s.w + 2 * s.pad_w));
      CHECK(outside_accumulation_bound(runs.first, ref, terms) == 0);
      CHECK(runs.again == runs.first);
    }
  }
}

TEST_CASE("gpu conv weight gradient by a GEMM over the unfolded input: any stride, in chunks",
          "[gpu][cudnn_graph]") {
  // ops/unfolded_gemm_wgrad.h's path (a ResNet stem on 3 channels, a 3x3
  // and a 1x1 downsampling; at stride 1 VGG's first convolution on 3
  // channels and 5 channels with padding 2): fp32 sums of exact products,
  // repeating.
  const auto conv = [](std::size_t c, std::size_t k, std::size_t r, std::size_t pad, DType p,
                       std::size_t stride = 2) {
    return test::nhwc_conv(3, c, 15, 13, k, r, r, pad, pad, stride, stride, p);
  };
  for (DType p : {DType::bf16, DType::f16}) {
    auto ctx = ComputeContext::create(kGpu, Tf32Mode::off, p);
    struct Case {
      detail::ConvGraphShape s;
      std::size_t cap;
    };
    for (const Case& c : {Case{conv(3, 16, 7, 3, p), detail::kShiftedWgradWorkspaceCap},
                          Case{conv(16, 32, 3, 1, p), detail::kShiftedWgradWorkspaceCap},
                          Case{conv(16, 32, 1, 0, p), detail::kShiftedWgradWorkspaceCap},
                          Case{conv(3, 16, 7, 3, p), 1},  // one image per chunk
                          Case{conv(3, 16, 3, 1, p, 1), detail::kShiftedWgradWorkspaceCap},
                          Case{conv(5, 16, 5, 2, p, 1), detail::kShiftedWgradWorkspaceCap},
                          Case{conv(3, 16, 3, 1, p, 1), 1}}) {
      const detail::ConvGraphShape& s = c.s;
      std::string why;
      auto g = detail::make_unfolded_gemm_wgrad(s, &why, c.cap);
      REQUIRE(g != nullptr);
      INFO(dtype_name(p) << " " << s.r << "x" << s.s << " C " << s.c << " engine: " << g->engine());
      CHECK(g->writes_kcrs() == (s.r == 1));
      const auto x = on_grid(test::hashed_vector(7, s.n * s.c * s.h * s.w), p);
      const auto dy = on_grid(test::hashed_vector(8, s.n * s.k * s.p * s.q), p);
      const WgradReference ref = wgrad_reference(s, x, dy, g->writes_kcrs());
      const Tensor gx = words_on(x, p, kGpu), gdy = words_on(dy, p, kGpu);
      const TwoRuns runs = run_twice(*ctx, *g, gx, gdy, ref.sum.size());
      CHECK(outside_accumulation_bound(runs.first, ref, double(s.n * s.p * s.q)) == 0);
      CHECK(runs.again == runs.first);
    }
  }
}

TEST_CASE("gpu conv weight gradient GEMMs: every candidate a plan times, each cuBLASLt rank",
          "[gpu][cudnn_graph]") {
  // gemm_wgrad_candidates lists the variants a plan times (chunkings, and
  // cuBLASLt's first three ranked algorithms): whichever wins must compute
  // the weight gradient and repeat its bits, with dW where a step puts it
  // (the flat gradient: 16-byte, not 256-byte, aligned) and a workspace
  // that holds anything. A rank past what the heuristic ranks for a shape
  // is refused (an Error the timing passes over).
  const DType p = DType::bf16;
  auto ctx = ComputeContext::create(kGpu, Tf32Mode::off, p);
  // VGG's first convolution too (3 channels at stride 1: the unfolded input
  // first, the shifted rows' 6-byte rows after it).
  for (const GemmShape shape :
       {GemmShape{3, 1, 1}, GemmShape{3, 1, 2}, GemmShape{1, 0, 1}, GemmShape{3, 1, 1, 3}}) {
    const detail::ConvGraphShape s = gemm_conv(shape, p);
    std::string why;
    const auto list = detail::gemm_wgrad_candidates(s, &why);
    REQUIRE(list.size() >= static_cast<std::size_t>(detail::kGemmWgradRanks));
    // The first may run untried (its operands all aligned: VGG's dW rows of
    // 27 floats staged at a pitch of 28); a later rank never.
    CHECK(detail::gemm_wgrad_sure(s, *list.front()));
    for (const auto& g : list)
      if (g->engine().find("-algo") != std::string::npos)
        CHECK_FALSE(detail::gemm_wgrad_sure(s, *g));
    // Each listed GEMM is built again by its name (a remembered choice, one
    // made at another batch); and a cap's name where this batch's list has
    // none (its chunks the 256 MiB cap's here) builds too.
    for (const auto& g : list) {
      const auto again = detail::gemm_wgrad_named(s, g->engine());
      REQUIRE(again != nullptr);
      CHECK(again->workspace_bytes() == g->workspace_bytes());
    }
    if (shape.r > 1) {
      const std::string small = detail::gemm_wgrad_engine_name(
          detail::gemm_wgrad_forms(s, &why).front(), s, false, detail::kShiftedWgradCacheCap, 0);
      CHECK(std::none_of(list.begin(), list.end(),
                         [&](const auto& g) { return g->engine() == small; }));
      const auto named = detail::gemm_wgrad_named(s, small);
      REQUIRE(named != nullptr);
      CHECK(named->engine() == small);
    }
    // A padded stride-1 shape lists both forms, each with every rank.
    if (shape.stride == 1 && shape.r > 1) {
      CHECK(list.front()->engine().starts_with(shape.c % 8 == 0 ? "cublasLt-shifted"
                                                                : "cublasLt-unfolded"));
      CHECK(list.size() >= 2 * static_cast<std::size_t>(detail::kGemmWgradRanks));
    }
    const auto x = on_grid(test::hashed_vector(9, s.n * s.c * s.h * s.w), p);
    const auto dy = on_grid(test::hashed_vector(10, s.n * s.k * s.p * s.q), p);
    const bool pointwise = shape.r == 1;
    const WgradReference ref = wgrad_reference(s, x, dy, /*kcrs=*/pointwise);
    Tensor gx = words_on(x, p, kGpu), gdy = words_on(dy, p, kGpu);
    std::size_t ran = 0;
    for (const auto& g : list) {
      INFO("r " << shape.r << " stride " << shape.stride << " C " << shape.c
                << " engine: " << g->engine());
      CHECK(detail::names_gemm_wgrad(g->engine()));
      CHECK(g->writes_kcrs() == pointwise);
      // dW 16 bytes into its buffer (a step's flat gradient is no more
      // aligned).
      TwoRuns runs;
      try {
        runs = run_twice(*ctx, *g, gx, gdy, ref.sum.size(), 4);
      } catch (const Error& e) {
        CHECK(gemm_may_be_refused(s, *g, e));
        WARN("refused on this device: " << g->engine() << ": " << e.what());
        continue;
      }
      ++ran;
      const double terms = double(s.n * (s.h + 2 * shape.pad) * (s.w + 2 * shape.pad));
      CHECK(outside_accumulation_bound(runs.first, ref, terms) == 0);
      CHECK(runs.again == runs.first);
    }
    CHECK(ran >= 1);
  }
}

TEST_CASE("gpu conv weight gradient candidates: the timing's spot check accepts each one",
          "[gpu][cudnn_graph]") {
  // A timed plan fills its trial operands with the trial pattern on the GPU
  // and passes over a candidate whose dW misses the pattern's sums at a few
  // entries (ops/wgrad_spot_check.h): the fill must give the host's values,
  // and every right engine (cuDNN's, either dW dtype and order, and the
  // GEMMs) must pass, or a plan would time fewer than it has; another
  // shape's sums must not.
  const DType p = DType::bf16;
  auto ctx = ComputeContext::create(kGpu, Tf32Mode::off, p);
  const auto& h = detail::handles_of(*ctx);
  for (const GemmShape shape : {GemmShape{3, 1, 1}, GemmShape{3, 1, 2}, GemmShape{1, 0, 1},
                                GemmShape{7, 3, 2, 8}, GemmShape{3, 1, 1, 3}}) {
    const detail::ConvGraphShape s = gemm_conv(shape, p);
    CAPTURE(shape.r, shape.pad, shape.stride, shape.c);
    Tensor gx = Tensor::empty({s.n * s.c * s.h * s.w}, p, kGpu);
    Tensor gdy = Tensor::empty({s.n * s.k * s.p * s.q}, p, kGpu);
    kernels::fill_trial_pattern_cuda(gx.data(), p, gx.numel(), detail::kTrialSeedX, h.stream);
    kernels::fill_trial_pattern_cuda(gdy.data(), p, gdy.numel(), detail::kTrialSeedDy, h.stream);
    const std::vector<float> x = widened_values(gx, *ctx);
    std::size_t differ = 0;
    for (std::size_t i = 0; i < x.size(); ++i)
      differ += x[i] != kernels::trial_pattern_value(i, detail::kTrialSeedX);
    CHECK(differ == 0);
    const auto spots = detail::wgrad_spots(s);
    detail::ConvGraphShape moved = s;
    moved.pad_w = s.pad_w + 1;  // every tap a column further left
    const auto moved_spots = detail::wgrad_spots(moved);
    std::vector<std::unique_ptr<detail::ConvWgradGraph>> list;
    std::string why;
    for (const DType dw_type : {DType::f32, p})
      for (auto& g : detail::ConvWgradGraph::candidates(
               h, s, dw_type, detail::EngineWanted{.most = 3, .only = {}}, &why))
        list.push_back(std::move(g));
    for (auto& g : detail::gemm_wgrad_candidates(s, &why)) list.push_back(std::move(g));
    REQUIRE_FALSE(list.empty());
    std::size_t ran = 0;
    for (const auto& g : list) {
      INFO("engine: " << g->engine() << " dW " << dtype_name(g->dw_dtype())
                      << (g->writes_kcrs() ? " KCRS" : " KRSC"));
      const std::size_t count = s.k * s.c * s.r * s.s;
      Tensor gdw = Tensor::empty({count}, g->dw_dtype(), kGpu);
      Tensor ws = Tensor::empty({g->workspace_bytes() / 4 + 1}, DType::f32, kGpu);
      try {
        g->run(h, gx.data(), gdy.data(), gdw.data(), ws.data());
        ctx->synchronize();
      } catch (const Error& e) {
        CHECK(gemm_may_be_refused(s, *g, e));
        continue;
      }
      ++ran;
      std::vector<std::byte> dw(count * dtype_size(g->dw_dtype()));
      Tensor::borrow(dw.data(), {count}, g->dw_dtype(), Device::cpu()).copy_from(gdw);
      CHECK(detail::wgrad_spot_disagreement(s, spots, dw.data(), g->dw_dtype(), g->writes_kcrs()) ==
            "");
      CHECK_FALSE(detail::wgrad_spot_disagreement(s, moved_spots, dw.data(), g->dw_dtype(),
                                                  g->writes_kcrs())
                      .empty());
    }
    CHECK(ran >= 1);
  }
}

TEST_CASE("gpu convolutions of one shape share the context's graphs, each on its own tensors",
          "[gpu][cudnn_graph]") {
  const DType p = DType::bf16;
  for (const Layout layout : {Layout::nchw, Layout::nhwc}) {
    CAPTURE(layout == Layout::nhwc);
    Conv2dGeometry g;
    g.in_channels = 16, g.height = 9, g.width = 7, g.out_channels = 32, g.kernel = 3;
    g.stride = 2, g.padding = 1, g.layout = layout;
    Conv2dGeometry other = g;
    other.out_channels = 24;
    const std::size_t batch = 3;
    struct Run {
      std::vector<float> y, dx, dw;
    };
    // One convolution's forward and backward on the stored path, on inputs
    // made from `salt`, on op (of context ctx).
    const auto run = [&](Conv2dOp& op, const ComputeContext& ctx, std::uint64_t salt) {
      REQUIRE(op.stores_activations());
      const Conv2dGeometry& q = op.geometry();
      const std::size_t nx = batch * q.in_channels * q.height * q.width;
      const std::size_t ny = batch * q.out_channels * q.out_height() * q.out_width();
      const std::size_t nw = q.out_channels * q.in_channels * q.kh() * q.kw();
      const Tensor x = words_on(on_grid(salt, nx, p), p, kGpu);
      const Tensor dy = words_on(on_grid(salt + 1, ny, p), p, kGpu);
      const Tensor w = to_gpu(on_grid(salt + 2, nw, p));
      Tensor y = Tensor::zeros({ny}, p, kGpu), dx = Tensor::zeros({nx}, p, kGpu);
      Tensor dw = Tensor::zeros({nw}, DType::f32, kGpu);
      op.forward(x.buffer(), w.data_as<float>(), nullptr, y.buffer(), batch);
      op.backward(x.buffer(), w.data_as<float>(), dy.buffer(), dx.buffer(), dw.data_as<float>(),
                  nullptr, batch, false);
      return Run{widened_values(y, ctx), widened_values(dx, ctx), to_host(dw, ctx)};
    };
    const auto ctx = ComputeContext::create(kGpu, Tf32Mode::off, p);
    const auto& h = detail::handles_of(*ctx);
    // A plan builds its graphs for its maximum batch when it is made:
    // forward, backward data and the weight gradient, built (or refused) once
    // for the two layers of one shape.
    const std::size_t before = detail::conv_graphs_built(h);
    Conv2dOp a(*ctx, g, batch);
    const std::size_t after_a = detail::conv_graphs_built(h);
    CHECK(after_a - before <= 3);
    Conv2dOp b(*ctx, g, batch);
    INFO(a.describe());
    CHECK(detail::conv_graphs_built(h) == after_a);  // b shares a's
    const Run ra = run(a, *ctx, 10), rb = run(b, *ctx, 20);
    CHECK(detail::conv_graphs_built(h) == after_a);
    Conv2dOp c(*ctx, other, batch);
    CHECK(detail::conv_graphs_built(h) > after_a);  // another shape: its own
    (void)run(c, *ctx, 30);
    // Each layer on its own tensors, as the layer alone on a fresh context.
    const auto alone_a = ComputeContext::create(kGpu, Tf32Mode::off, p);
    const auto alone_b = ComputeContext::create(kGpu, Tf32Mode::off, p);
    Conv2dOp a1(*alone_a, g, batch), b1(*alone_b, g, batch);
    const Run wa = run(a1, *alone_a, 10), wb = run(b1, *alone_b, 20);
    CHECK(ra.y == wa.y);
    CHECK(ra.dx == wa.dx);
    CHECK(ra.dw == wa.dw);
    CHECK(rb.y == wb.y);
    CHECK(rb.dx == wb.dx);
    CHECK(rb.dw == wb.dw);
    CHECK(ra.y != rb.y);
  }
}

TEST_CASE("gpu convolution at a batch it was not timed at: the timed batch's engines",
          "[gpu][cudnn_graph]") {
  // A plan times its maximum batch; a smaller one (a rank's share of an
  // uneven batch) takes the engines chosen there where they build for it,
  // which cuDNN's graph engines do for another batch, and computes the same
  // values as a plan timed at that batch (within the engines' rounding).
  const DType p = DType::bf16;
  Conv2dGeometry g;
  g.in_channels = 16, g.height = 9, g.width = 7, g.out_channels = 32, g.kernel = 3;
  g.stride = 1, g.padding = 1, g.layout = Layout::nhwc;
  const auto step = [&](Conv2dOp& op, const ComputeContext& ctx, std::size_t batch) {
    const std::size_t nx = batch * g.in_channels * g.height * g.width;
    const std::size_t ny = batch * g.out_channels * g.out_height() * g.out_width();
    const std::size_t nw = g.out_channels * g.in_channels * g.kh() * g.kw();
    const Tensor x = words_on(on_grid(41, nx, p), p, kGpu);
    const Tensor dy = words_on(on_grid(42, ny, p), p, kGpu);
    const Tensor w = to_gpu(on_grid(43, nw, p));
    Tensor y = Tensor::zeros({ny}, p, kGpu), dx = Tensor::zeros({nx}, p, kGpu);
    Tensor dw = Tensor::zeros({nw}, DType::f32, kGpu);
    op.forward(x.buffer(), w.data_as<float>(), nullptr, y.buffer(), batch);
    op.backward(x.buffer(), w.data_as<float>(), dy.buffer(), dx.buffer(), dw.data_as<float>(),
                nullptr, batch, false);
    return std::vector<std::vector<float>>{widened_values(y, ctx), widened_values(dx, ctx),
                                           to_host(dw, ctx)};
  };
  const auto ctx = ComputeContext::create(kGpu, Tf32Mode::off, p);
  Conv2dOp op(*ctx, g, 4);
  (void)step(op, *ctx, 4);
  const auto smaller = step(op, *ctx, 3);
  const std::string described = op.describe();
  INFO(described);
  REQUIRE(described.find("batch 3: ") != std::string::npos);
  const std::string at3 = described.substr(described.find("batch 3: "));
  CHECK(at3.find("the engine chosen at the timed batch") != std::string::npos);
  // The same values as a plan timed at batch 3, within a 16-bit rounding
  // (y and dx are stored in bf16; a timed dW may be a bf16 engine's,
  // widened).
  const auto alone = ComputeContext::create(kGpu, Tf32Mode::off, p);
  Conv2dOp timed3(*alone, g, 3);
  const auto reference = step(timed3, *alone, 3);
  for (std::size_t t = 0; t < 3; ++t) {
    INFO("tensor " << t);
    REQUIRE(smaller[t].size() == reference[t].size());
    std::size_t outside = 0;
    for (std::size_t i = 0; i < smaller[t].size(); ++i)
      outside += !(std::abs(smaller[t][i] - reference[t][i]) <=
                   0x1p-7f * (1.0f + std::abs(reference[t][i])));
    CHECK(outside == 0);
  }
}

TEST_CASE(
    "gpu convolutions of a context share their scratch: another plan of a shape costs its "
    "16-bit filter alone; a larger filter grows it for all",
    "[gpu][cudnn_graph][memory]") {
  Conv2dGeometry g;
  g.in_channels = 64, g.height = 14, g.width = 14, g.out_channels = 96, g.kernel = 3;
  g.stride = 1, g.padding = 1;
  const std::size_t batch = 8;
  for (const DType p : {DType::bf16, DType::f32}) {
    for (const Layout layout : {Layout::nchw, Layout::nhwc}) {
      CAPTURE(dtype_name(p), layout == Layout::nhwc);
      g.layout = layout;
      const auto ctx = ComputeContext::create(kGpu, Tf32Mode::on, p);
      // A step of op (the stored path under bf16, the fp32 one under fp32):
      // its weight gradient, written into dw at `dw_offset` floats (1: not
      // 16-byte aligned, written beside it and copied) or added to zeros.
      const auto step = [&](Conv2dOp& op, const ComputeContext& c, std::size_t dw_offset,
                            bool accumulate) {
        const Conv2dGeometry& q = op.geometry();
        const std::size_t nx = batch * q.in_channels * q.height * q.width;
        const std::size_t ny = batch * q.out_channels * q.out_height() * q.out_width();
        const std::size_t nw = q.out_channels * q.in_channels * q.kh() * q.kw();
        const Tensor w = to_gpu(on_grid(7, nw, DType::bf16));
        Tensor dw_buffer = Tensor::zeros({nw + dw_offset}, DType::f32, kGpu);
        float* dw = dw_buffer.data_as<float>() + dw_offset;
        if (op.stores_activations()) {
          const Tensor x = words_on(on_grid(5, nx, p), p, kGpu);
          const Tensor dy = words_on(on_grid(6, ny, p), p, kGpu);
          Tensor y = Tensor::zeros({ny}, p, kGpu), dx = Tensor::zeros({nx}, p, kGpu);
          op.forward(x.buffer(), w.data_as<float>(), nullptr, y.buffer(), batch);
          op.backward(x.buffer(), w.data_as<float>(), dy.buffer(), dx.buffer(), dw, nullptr, batch,
                      accumulate);
        } else {
          const Tensor x = to_gpu(on_grid(5, nx, DType::bf16));
          const Tensor dy = to_gpu(on_grid(6, ny, DType::bf16));
          Tensor y = Tensor::zeros({ny}, DType::f32, kGpu);
          Tensor dx = Tensor::zeros({nx}, DType::f32, kGpu);
          op.forward(x.data_as<float>(), w.data_as<float>(), nullptr, y.data_as<float>(), batch);
          op.backward(x.data_as<float>(), w.data_as<float>(), dy.data_as<float>(),
                      dx.data_as<float>(), dw, nullptr, batch, accumulate);
        }
        return to_host(dw, nw, c);
      };
      Conv2dOp a(*ctx, g, batch);
      REQUIRE(a.stores_activations() == (p != DType::f32));
      const std::vector<float> first = step(a, *ctx, 0, true);  // grows what the shape needs
      const std::size_t in_use = device_memory_use().in_use;
      // The plan's own memory is its 16-bit filter copy: the workspace and
      // the filter-sized scratch are the context's, already grown.
      const std::size_t own =
          p == DType::f32 ? 0 : g.out_channels * g.in_channels * 9 * sizeof(std::uint16_t);
      Conv2dOp b(*ctx, g, batch);
      INFO(b.describe());
      CHECK(device_memory_use().in_use - in_use == own);
      CHECK(step(b, *ctx, 0, true) == first);
      CHECK(step(b, *ctx, 1, false) == first);
      CHECK(step(b, *ctx, 1, true) == first);
      CHECK(device_memory_use().in_use - in_use == own);
      // A larger filter grows the shared scratch (the old buffers freed, the
      // others' next calls fetch the new ones): its values are its own on a
      // context of its own, and the first plan's stay its own.
      Conv2dGeometry wide = g;
      wide.out_channels = 2 * g.out_channels;
      Conv2dOp c(*ctx, wide, batch);
      const std::vector<float> grown = step(c, *ctx, 1, true);
      const auto alone = ComputeContext::create(kGpu, Tf32Mode::on, p);
      Conv2dOp c1(*alone, wide, batch);
      CHECK(step(c1, *alone, 0, false) == grown);
      CHECK(step(a, *ctx, 1, true) == first);
      CHECK(step(b, *ctx, 0, false) == first);
    }
  }
}

TEST_CASE("gpu attention on tensor cores (cuDNN SDPA) against the CPU layer, repeating",
          "[gpu][cudnn_graph][sdpa]") {
  const DropoutContext dc{3, 1, 17};
  const std::size_t batch = 2, t = 70, c = 128, heads = 2;  // heads of 64
  const Shape in{t, c};
  const std::size_t n = batch * t * c, np = 4 * c * c + 4 * c;
  auto cpu = ComputeContext::create(Device::cpu());
  for (DType p : {DType::bf16, DType::f16}) {
    CAPTURE(dtype_name(p));
    auto gpu = ComputeContext::create(kGpu, Tf32Mode::off, p);
    CausalSelfAttentionLayer lc("attn", in, heads, *cpu, batch, 0.0f, 4, &dc);
    CausalSelfAttentionLayer lg("attn", in, heads, *gpu, batch, 0.0f, 4, &dc);
    INFO(lg.describe_kernels());
    REQUIRE(lg.tensor_cores());
    CHECK_FALSE(lc.tensor_cores());
    // Attention dropout keeps ringtrain's own kernels.
    CausalSelfAttentionLayer dropped("attn", in, heads, *gpu, batch, 0.1f, 4, &dc);
    CHECK_FALSE(dropped.tensor_cores());
    const auto params = on_grid(test::hashed_vector(30, np, -0.1f, 0.1f), p);
    std::vector<float> pc = params, grads(np);
    lc.bind(pc.data(), grads.data());
    Tensor pg = to_gpu(params), gg = to_gpu(grads);
    lg.bind(pg.data_as<float>(), gg.data_as<float>());
    const auto x = on_grid(test::hashed_vector(31, n), p);
    const auto dy = on_grid(test::hashed_vector(32, n), p);
    std::vector<float> y(n), dx(n);
    lc.forward(x.data(), y.data(), batch, true);
    lc.backward(x.data(), y.data(), dy.data(), dx.data(), batch, false);
    Tensor gx = to_gpu(x), gdy = to_gpu(dy), gy = to_gpu(y), gdx = to_gpu(dx);
    std::vector<float> first_y, first_dx, first_g;
    for (int repeat = 0; repeat < 2; ++repeat) {
      lg.forward(gx.data_as<float>(), gy.data_as<float>(), batch, true);
      lg.backward(gx.data_as<float>(), gy.data_as<float>(), gdy.data_as<float>(),
                  gdx.data_as<float>(), batch, false);
      const auto hy = to_host(gy, *gpu), hdx = to_host(gdx, *gpu), hg = to_host(gg, *gpu);
      if (repeat == 0) {
        // Q, K, V, P and O in 16 bits: a few of their roundings apart.
        const double tol = p == DType::bf16 ? 3e-2 : 5e-3;
        require_close(hy, y, tol, "SDPA y vs the CPU");
        require_close(hdx, dx, tol, "SDPA dx vs the CPU");
        require_close(hg, grads, tol, "SDPA parameter gradients vs the CPU");
        first_y = hy, first_dx = hdx, first_g = hg;
      } else {
        CHECK(hy == first_y);
        CHECK(hdx == first_dx);
        CHECK(hg == first_g);
      }
    }
    // The stored path (the model's: 16-bit x, y, dy, dx) against the fp32
    // interface above, on the same device: the same products, rounded where
    // they are stored instead of by the model's adapter.
    {
      CausalSelfAttentionLayer ls("attn", in, heads, *gpu, batch, 0.0f, 4, &dc);
      REQUIRE(ls.stores_activations());
      std::vector<float> zero(np);
      Tensor ps = to_gpu(params), gs = to_gpu(zero);
      ls.bind(ps.data_as<float>(), gs.data_as<float>());
      Tensor sx = words_on(x, p, kGpu), sdy = words_on(dy, p, kGpu);
      Tensor sy = Tensor::empty({n}, p, kGpu), sdx = Tensor::empty({n}, p, kGpu);
      const std::vector<BufferView> xs{sx.buffer()};
      ls.forward_stored(xs, sy.buffer(), batch, true);
      ls.backward_stored(xs, sy.buffer(), sdy.buffer(), {sdx.buffer()}, batch, false);
      Tensor wy = Tensor::empty({n}, DType::f32, kGpu), wdx = Tensor::empty({n}, DType::f32, kGpu);
      convert_storage(*gpu, wy.buffer(), sy.buffer());  // widened
      convert_storage(*gpu, wdx.buffer(), sdx.buffer());
      const double tol = p == DType::bf16 ? 2e-2 : 4e-3;
      require_close(to_host(wy, *gpu), first_y, tol, "stored y vs the fp32 interface");
      require_close(to_host(wdx, *gpu), first_dx, tol, "stored dx vs the fp32 interface");
      require_close(to_host(gs, *gpu), first_g, tol, "stored gradients vs the fp32 interface");
    }
    // A smaller batch builds its own graphs on first use, and they compute
    // what the CPU does at that batch (its first sample), forward and back.
    {
      const std::size_t n1 = t * c;
      std::vector<float> y1(n1), dx1(n1);
      lc.forward(x.data(), y1.data(), 1, true);
      lc.backward(x.data(), y1.data(), dy.data(), dx1.data(), 1, false);
      lg.forward(gx.data_as<float>(), gy.data_as<float>(), 1, true);
      lg.backward(gx.data_as<float>(), gy.data_as<float>(), gdy.data_as<float>(),
                  gdx.data_as<float>(), 1, false);
      auto hy = to_host(gy, *gpu), hdx = to_host(gdx, *gpu);
      hy.resize(n1);
      hdx.resize(n1);
      const double tol = p == DType::bf16 ? 3e-2 : 5e-3;
      require_close(hy, y1, tol, "SDPA y at batch 1 vs the CPU");
      require_close(hdx, dx1, tol, "SDPA dx at batch 1 vs the CPU");
      require_close(to_host(gg, *gpu), grads, tol, "SDPA gradients at batch 1 vs the CPU");
    }
  }
  // Asked for where it cannot run: an Error naming why.
  auto fp32 = ComputeContext::create(kGpu, Tf32Mode::off);
  setenv("RINGTRAIN_ATTENTION", "sdpa", 1);
  CHECK_THROWS_WITH(CausalSelfAttentionLayer("attn", in, heads, *fp32, batch, 0.0f, 4, &dc),
                    Catch::Contains("16-bit"));
  unsetenv("RINGTRAIN_ATTENTION");
}

int main(int argc, char** argv) {
  if (!cuda_device_available()) return kSkippedExitCode;
  cuda_set_device(0);
  return Catch::Session().run(argc, argv);
}
