// Fused (flash-attention style) causal attention checked without a GPU: the
// CPU runs the GPU's tiled algorithm through the same tile arithmetic
// (kernels/flash_attention.cuh) with small tiles, T not a multiple of them,
// and must agree with the unfused arithmetic (the whole T x T matrix,
// kernels/causal_attention.cuh) in O and every gradient, with attention
// dropout too (the same masks). Then the layer: fused against unfused through
// causal_self_attention, a finite-difference check of the fused path, and the
// RINGTRAIN_ATTENTION switch (cuDNN's SDPA refused where it cannot run).
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdlib>
#include <limits>

#include "kernels/causal_attention.cuh"
#include "kernels/flash_attention.cuh"
#include "model/causal_self_attention_layer.h"
#include "ringtrain/model/gradient_check.h"
#include "ringtrain/ops/compute_context.h"
#include "ringtrain/ops/dropout.h"
#include "ringtrain/ops/fused_attention.h"
#include "tests/model/test_data.h"

using namespace ringtrain;

namespace {

struct Attention {
  std::vector<float> o, d_qkv;
};

// The unfused arithmetic, head by head: S = scale Q K^T, P = causal softmax,
// O = (P o Z) V; dV = (P o Z)^T dO, dP = Z o (dO V^T), dS = softmax'(dP),
// dQ = dS K, dK = dS^T Q.
Attention unfused(const FusedAttentionShape& s, const std::vector<float>& qkv,
                  const std::vector<float>& d_o) {
  const std::size_t t = s.t, c3 = 3 * s.c, d = s.c / s.heads;
  const float scale = 1.0f / std::sqrt(static_cast<float>(d)), keep = 1.0f / (1.0f - s.dropout);
  Attention a{std::vector<float>(s.batch * t * s.c), std::vector<float>(s.batch * t * c3)};
  std::vector<float> sc(t * t), p(t * t), z(t * t), dp(t * t), ds(t * t);
  for (std::size_t b = 0; b < s.batch; ++b)
    for (std::size_t h = 0; h < s.heads; ++h) {
      const std::uint64_t key = kernels::attention_head_key(s.node_key, h);
      const float* base = qkv.data() + b * t * c3 + h * d;
      auto q = [&](std::size_t i) { return base + i * c3; };
      auto k = [&](std::size_t j) { return base + j * c3 + s.c; };
      auto v = [&](std::size_t j) { return base + j * c3 + 2 * s.c; };
      auto dout = [&](std::size_t i) { return d_o.data() + (b * t + i) * s.c + h * d; };
      for (std::size_t i = 0; i < t; ++i) {
        for (std::size_t j = 0; j < t; ++j) {
          sc[i * t + j] = scale * kernels::flash_dot(q(i), k(j), static_cast<int>(d));
          z[i * t + j] =
              kernels::attention_dropout_factor(key, b, static_cast<int>(t), static_cast<int>(i),
                                                static_cast<int>(j), s.dropout, keep);
        }
        kernels::causal_softmax_row(sc.data() + i * t, static_cast<int>(i), static_cast<int>(t),
                                    p.data() + i * t);
      }
      for (std::size_t i = 0; i < t; ++i)
        for (std::size_t c = 0; c < d; ++c) {
          float sum = 0.0f;
          for (std::size_t j = 0; j < t; ++j) sum += p[i * t + j] * z[i * t + j] * v(j)[c];
          a.o[(b * t + i) * s.c + h * d + c] = sum;
        }
      for (std::size_t i = 0; i < t; ++i) {
        for (std::size_t j = 0; j < t; ++j)
          dp[i * t + j] = z[i * t + j] * kernels::flash_dot(dout(i), v(j), static_cast<int>(d));
        kernels::causal_softmax_row_backward(p.data() + i * t, dp.data() + i * t,
                                             static_cast<int>(i), static_cast<int>(t), scale,
                                             ds.data() + i * t);
      }
      float* dbase = a.d_qkv.data() + b * t * c3 + h * d;
      for (std::size_t i = 0; i < t; ++i)
        for (std::size_t c = 0; c < d; ++c) {
          float dq = 0.0f, dk = 0.0f, dv = 0.0f;
          for (std::size_t j = 0; j < t; ++j) {
            dq += ds[i * t + j] * k(j)[c];
            dk += ds[j * t + i] * q(j)[c];
            dv += p[j * t + i] * z[j * t + i] * dout(j)[c];
          }
          dbase[i * c3 + c] = dq;
          dbase[i * c3 + s.c + c] = dk;
          dbase[i * c3 + 2 * s.c + c] = dv;
        }
    }
  return a;
}

void require_close(const std::vector<float>& got, const std::vector<float>& want, double tol,
                   const std::string& what) {
  REQUIRE(got.size() == want.size());
  std::size_t wrong = 0, first = got.size();
  for (std::size_t i = 0; i < got.size(); ++i)
    if (!(std::abs(got[i] - want[i]) <= tol * (1.0 + std::abs(want[i])))) {
      if (wrong++ == 0) first = i;
    }
  INFO(what << ": " << wrong << " of " << got.size() << " differ by more than " << tol
            << (wrong ? " (first at " + std::to_string(first) + ": " + std::to_string(got[first]) +
                            " vs " + std::to_string(want[first]) + ")"
                      : std::string()));
  CHECK(wrong == 0);
}

}  // namespace

TEST_CASE("fused attention: the tiled algorithm on the host equals the unfused arithmetic",
          "[fused_attention][transformer]") {
  auto ctx = ComputeContext::create(Device::cpu());
  for (float dropout : {0.0f, 0.3f}) {
    FusedAttentionShape s{2, 10, 8, 2, dropout, dropout > 0 ? dropout_mask_key(5, 1, 3, 2) : 0};
    const auto qkv = test::hashed_vector(1, s.batch * s.t * 3 * s.c, -2.0f, 2.0f);
    const auto d_o = test::hashed_vector(2, s.batch * s.t * s.c);
    const Attention want = unfused(s, qkv, d_o);
    std::vector<float> first_o;  // the first tiling's O
    for (AttentionTiles tiles : {AttentionTiles{3, 4}, AttentionTiles{4, 3}, AttentionTiles{1, 1},
                                 AttentionTiles{64, 64}}) {
      const std::string at = "dropout " + std::to_string(dropout) + ", tiles " +
                             std::to_string(tiles.rows) + "x" + std::to_string(tiles.cols);
      const float nan = std::numeric_limits<float>::quiet_NaN();
      std::vector<float> o(s.batch * s.t * s.c, nan), lse(s.batch * s.heads * s.t, nan);
      std::vector<float> delta(lse.size(), nan), d_qkv(qkv.size(), nan);
      fused_attention_forward(*ctx, s, qkv.data(), o.data(), lse.data(), "attn", tiles);
      fused_attention_backward(*ctx, s, qkv.data(), o.data(), d_o.data(), lse.data(), delta.data(),
                               d_qkv.data(), tiles);
      require_close(o, want.o, 1e-5, "O, " + at);
      require_close(d_qkv, want.d_qkv, 1e-5, "dQ, dK, dV, " + at);  // every element written
      // The same tiles again: the same bits (fixed summation order).
      std::vector<float> o2(o.size()), lse2(lse.size()), d_qkv2(d_qkv.size());
      fused_attention_forward(*ctx, s, qkv.data(), o2.data(), lse2.data(), "attn", tiles);
      fused_attention_backward(*ctx, s, qkv.data(), o2.data(), d_o.data(), lse2.data(),
                               delta.data(), d_qkv2.data(), tiles);
      CHECK(o2 == o);
      CHECK(d_qkv2 == d_qkv);
      if (first_o.empty()) first_o = o;
    }
    if (dropout > 0) {  // the mask is real: without it O differs
      FusedAttentionShape none = s;
      none.dropout = 0;
      CHECK(unfused(none, qkv, d_o).o != first_o);
    }
  }
  // A head wider than the kernels hold is refused, naming the layer.
  FusedAttentionShape wide{1, 2, 2 * 129, 2, 0.0f, 0};
  std::vector<float> qkv(2 * 3 * wide.c), o(2 * wide.c), lse(4);
  CHECK_THROWS_WITH(
      fused_attention_forward(*ctx, wide, qkv.data(), o.data(), lse.data(), "h.0.attn"),
      Catch::Contains("h.0.attn") && Catch::Contains("up to 128"));
}

namespace {

struct BoundLayer {
  std::unique_ptr<CausalSelfAttentionLayer> layer;
  std::vector<float> params, grads;
};

BoundLayer attention(AttentionKernel kernel, const ComputeContext& ctx, const DropoutContext& dc,
                     float dropout) {
  BoundLayer b{std::make_unique<CausalSelfAttentionLayer>("attn", Shape{10, 8}, 2, ctx, 3, dropout,
                                                          4, &dc, kernel),
               {},
               {}};
  std::size_t n = 0;
  for (const ParamDesc& p : b.layer->param_descs()) n += p.shape.numel();
  b.params = test::hashed_vector(7, n, -0.5f, 0.5f);
  b.grads.assign(n, 0.0f);
  b.layer->bind(b.params.data(), b.grads.data());
  return b;
}

}  // namespace

TEST_CASE("causal_self_attention: the fused path equals the unfused one on the CPU",
          "[fused_attention][transformer][layer]") {
  auto ctx = ComputeContext::create(Device::cpu());
  const DropoutContext dc{3, 1, 17};
  for (float dropout : {0.0f, 0.3f})
    for (bool training : {false, true}) {
      CAPTURE(dropout, training);
      BoundLayer f = attention(AttentionKernel::fused, *ctx, dc, dropout);
      BoundLayer u = attention(AttentionKernel::unfused, *ctx, dc, dropout);
      CHECK(f.layer->fused());
      CHECK_FALSE(u.layer->fused());
      const std::size_t batch = 3, n = batch * 10 * 8;
      const auto x = test::hashed_vector(8, n), dy = test::hashed_vector(9, n);
      std::vector<float> yf(n), yu(n), dxf(n), dxu(n);
      f.layer->forward(x.data(), yf.data(), batch, training);
      u.layer->forward(x.data(), yu.data(), batch, training);
      require_close(yf, yu, 1e-5, "y");
      f.layer->backward(x.data(), yf.data(), dy.data(), dxf.data(), batch, false);
      u.layer->backward(x.data(), yu.data(), dy.data(), dxu.data(), batch, false);
      require_close(dxf, dxu, 1e-5, "dx");
      require_close(f.grads, u.grads, 1e-5, "parameter gradients");
    }
}

TEST_CASE("causal_self_attention fused: finite-difference gradients, with dropout too",
          "[fused_attention][transformer][layer][gradient]") {
  auto ctx = ComputeContext::create(Device::cpu());
  const DropoutContext dc{};
  for (float dropout : {0.0f, 0.3f}) {
    CAPTURE(dropout);
    CausalSelfAttentionLayer layer("attn", Shape{5, 4}, 2, *ctx, 2, dropout, 0, &dc,
                                   AttentionKernel::fused);
    const GradientCheckResult r = check_layer_gradients(layer, {});
    INFO(r.report);
    CHECK(r.checked > 0);
    CHECK(r.ok);
  }
}

TEST_CASE("automatic attention: fused only on a GPU and only past the unfused score budget",
          "[fused_attention][transformer][layer]") {
  CHECK_FALSE(attention_fused_by_default(false, kUnfusedScoreBudget * 8));
  CHECK_FALSE(attention_fused_by_default(true, kUnfusedScoreBudget));
  CHECK(attention_fused_by_default(true, kUnfusedScoreBudget + 1));
  // gpt2 (12 heads) at 16 x 1024 runs unfused on a GPU; at 32 x 1024, fused.
  const std::size_t gpt2_p = sizeof(float) * 12 * 1024 * 1024;
  CHECK_FALSE(attention_fused_by_default(true, 16 * gpt2_p));
  CHECK(attention_fused_by_default(true, 32 * gpt2_p));
}

TEST_CASE("RINGTRAIN_ATTENTION selects the path; by default the CPU runs unfused",
          "[fused_attention][transformer][layer]") {
  auto ctx = ComputeContext::create(Device::cpu());
  const DropoutContext dc{};
  auto automatic = [&] {
    return CausalSelfAttentionLayer("attn", Shape{4, 4}, 2, *ctx, 1, 0.0f, 0, &dc).fused();
  };
  ::unsetenv("RINGTRAIN_ATTENTION");
  CHECK_FALSE(automatic());
  ::setenv("RINGTRAIN_ATTENTION", "fused", 1);
  CHECK(automatic());
  ::setenv("RINGTRAIN_ATTENTION", "unfused", 1);
  CHECK_FALSE(automatic());
  ::setenv("RINGTRAIN_ATTENTION", "flash", 1);
  CHECK_THROWS_WITH(automatic(), Catch::Contains("RINGTRAIN_ATTENTION='flash'"));
  // cuDNN's attention asked for where it cannot run: an Error saying why (the
  // CPU; on a GPU, attention dropout or fp32), never a silent fallback.
  ::setenv("RINGTRAIN_ATTENTION", "sdpa", 1);
  CHECK_THROWS_WITH(automatic(),
                    Catch::Contains("RINGTRAIN_ATTENTION=sdpa") && Catch::Contains("not on a GPU"));
  CHECK_THROWS_WITH(CausalSelfAttentionLayer("attn", Shape{4, 4}, 2, *ctx, 1, 0.1f, 0, &dc),
                    Catch::Contains("attention dropout is on"));
  ::unsetenv("RINGTRAIN_ATTENTION");
  // The automatic choice never picks it on the CPU.
  CHECK_FALSE(
      CausalSelfAttentionLayer("attn", Shape{4, 4}, 2, *ctx, 1, 0.0f, 0, &dc).tensor_cores());
}
