// The transformer ops and layers on the GPU against their CPU twins: token and
// position embeddings, layer_norm, the causal softmax, the strided-batched
// GEMM, gelu_tanh, the per-token loss over a wide vocabulary, the attention
// layer with its dropout (fused, and unfused, the GPU's default here, against the
// CPU and each other; the fused kernels against their CPU emulation), and gpt-nano through Model
// (loss and every gradient, with and without dropout). The token embedding's gradient is compared
// bit for bit (both sides add the rows of an id in row order) and every GPU result is checked to
// repeat bit for bit. Exits 77 (ctest: skipped) without CUDA or a device. --tf32 off throughout.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>
#include <cmath>

#include "model/causal_self_attention_layer.h"
#include "model/layer.h"
#include "ringtrain/launch/gpu_runtime.h"
#include "ringtrain/model/model.h"
#include "ringtrain/model/model_spec.h"
#include "ringtrain/ops/activation.h"
#include "ringtrain/ops/dropout.h"
#include "ringtrain/ops/fused_attention.h"
#include "ringtrain/ops/gemm.h"
#include "ringtrain/ops/softmax_cross_entropy.h"
#include "ringtrain/ops/transformer_ops.h"
#include "ringtrain/tensor/tensor.h"
#include "tests/model/grid_values.h"
#include "tests/model/test_data.h"
#include "tests/support/gpu_compare.h"
#include "tests/support/gpu_test.h"

using namespace ringtrain;
using namespace ringtrain::test;

TEST_CASE("gpu token_embedding: rows, and the ordered gradient equals the CPU's bit for bit",
          "[gpu][transformer]") {
  Contexts c;
  const std::size_t vocab = 37, dim = 70, rows = 300;
  std::vector<float> ids(rows);
  for (std::size_t r = 0; r < rows; ++r)  // repeats, skewed towards id 3 (a hot token)
    ids[r] = static_cast<float>(r % 3 == 0 ? 3 : (r * 11) % vocab);
  const auto w = test::hashed_vector(1, vocab * dim), dy = test::hashed_vector(2, rows * dim);
  std::vector<float> y(rows * dim);
  Tensor gids = to_gpu(ids), gw = to_gpu(w), gdy = to_gpu(dy), gy = to_gpu(y);
  token_embedding_forward(*c.cpu, ids.data(), w.data(), rows, 10, vocab, dim, y.data(), "e");
  token_embedding_forward(*c.gpu, gids.data_as<float>(), gw.data_as<float>(), rows, 10, vocab, dim,
                          gy.data_as<float>(), "e");
  CHECK(to_host(gy, *c.gpu) == y);
  for (bool accumulate : {false, true}) {
    std::vector<float> dw = test::hashed_vector(3, vocab * dim);
    Tensor gdw = to_gpu(dw);
    const std::size_t bytes = token_embedding_backward_workspace_bytes(*c.gpu, rows, vocab);
    Tensor ws = Tensor::zeros({bytes / 4 + 1}, DType::f32, kGpu);
    token_embedding_backward(*c.cpu, ids.data(), dy.data(), rows, vocab, dim, dw.data(), accumulate,
                             nullptr, 0);
    for (int repeat = 0; repeat < 2; ++repeat) {
      if (repeat == 1 && accumulate) break;  // accumulating twice is another sum
      token_embedding_backward(*c.gpu, gids.data_as<float>(), gdy.data_as<float>(), rows, vocab,
                               dim, gdw.data_as<float>(), accumulate, ws.data(), ws.bytes());
      CHECK(to_host(gdw, *c.gpu) == dw);
    }
  }
  // A width that 8 divides (the 8-column kernel) in fp32 and the 16-bit
  // storage dtypes: a hot token's run of over 200 rows (groups of 8 rows and
  // some over), shorter runs of other ids, and single rows.
  for (const DType t : {DType::f32, DType::bf16, DType::f16})
    for (const bool accumulate : {false, true}) {
      CAPTURE(dtype_name(t), accumulate);
      const std::size_t wide = 96, n = 400;
      std::vector<float> hot(n);
      for (std::size_t r = 0; r < n; ++r)
        hot[r] = static_cast<float>(r % 2 == 0 ? 3 : r % 31 == 1 ? 5 : (r * 11) % vocab);
      const std::vector<float> dyw = test::hashed_vector(12, n * wide, -2.0f, 2.0f);
      const Tensor cdy = stored(dyw, t, Device::cpu(), *c.cpu), gdyw = stored(dyw, t, kGpu, *c.cpu);
      std::vector<float> dw = test::hashed_vector(13, vocab * wide);
      Tensor gdw = to_gpu(dw), ghot = to_gpu(hot);
      const std::size_t bytes = token_embedding_backward_workspace_bytes(*c.gpu, n, vocab);
      Tensor ws = Tensor::zeros({bytes / 4 + 1}, DType::f32, kGpu);
      token_embedding_backward(*c.cpu, hot.data(), cdy.buffer(), n, vocab, wide, dw.data(),
                               accumulate, nullptr, 0);
      token_embedding_backward(*c.gpu, ghot.data_as<float>(), gdyw.buffer(), n, vocab, wide,
                               gdw.data_as<float>(), accumulate, ws.data(), ws.bytes());
      CHECK(to_host(gdw, *c.gpu) == dw);
    }
  // A value that is not a token id gives NaN rows on the GPU (the non-finite
  // guard reports the step), where the CPU names it.
  const std::vector<float> bad{1.0f, 2.5f, -1.0f, 37.0f};
  Tensor gbad = to_gpu(bad), gout = to_gpu(std::vector<float>(4 * dim));
  token_embedding_forward(*c.gpu, gbad.data_as<float>(), gw.data_as<float>(), 4, 4, vocab, dim,
                          gout.data_as<float>(), "e");
  const auto out = to_host(gout, *c.gpu);
  CHECK(std::isfinite(out[0]));
  for (std::size_t r = 1; r < 4; ++r) CHECK(std::isnan(out[r * dim]));
}

TEST_CASE("gpu position rows, layer_norm, causal softmax, batched gemm, gelu_tanh match the CPU",
          "[gpu][transformer]") {
  Contexts c;
  {  // position embedding: broadcast add, ordered sum over the batch, rest zeroed
    const std::size_t batch = 5, n = 96, total = 160;
    const auto x = test::hashed_vector(4, batch * n), w = test::hashed_vector(5, total);
    std::vector<float> y(batch * n), dw = test::hashed_vector(6, total);
    Tensor gx = to_gpu(x), gw = to_gpu(w), gy = to_gpu(y), gdw = to_gpu(dw);
    add_broadcast_rows(*c.cpu, x.data(), w.data(), y.data(), batch, n);
    add_broadcast_rows(*c.gpu, gx.data_as<float>(), gw.data_as<float>(), gy.data_as<float>(), batch,
                       n);
    CHECK(to_host(gy, *c.gpu) == y);
    broadcast_rows_grad(*c.cpu, x.data(), dw.data(), batch, n, total, false);
    broadcast_rows_grad(*c.gpu, gx.data_as<float>(), gdw.data_as<float>(), batch, n, total, false);
    require_close(to_host(gdw, *c.gpu), dw, 1e-6, "position gradient");
  }
  {  // layer_norm over rows of 200 (not a multiple of the warp)
    const std::size_t rows = 67, cc = 200;
    const auto x = test::hashed_vector(7, rows * cc, -2.0f, 3.0f), w = test::hashed_vector(8, cc),
               b = test::hashed_vector(9, cc), dy = test::hashed_vector(10, rows * cc);
    std::vector<float> y(rows * cc), mean(rows), rstd(rows), dx(rows * cc), dwb(2 * cc, 0.5f);
    Tensor gx = to_gpu(x), gwt = to_gpu(w), gb = to_gpu(b), gdy = to_gpu(dy), gy = to_gpu(y),
           gm = to_gpu(mean), gr = to_gpu(rstd), gdx = to_gpu(dx), gdwb = to_gpu(dwb);
    for (bool accumulate : {false, true}) {
      layer_norm_forward(*c.cpu, x.data(), w.data(), b.data(), rows, cc, 1e-5f, y.data(),
                         mean.data(), rstd.data());
      layer_norm_forward(*c.gpu, gx.data_as<float>(), gwt.data_as<float>(), gb.data_as<float>(),
                         rows, cc, 1e-5f, gy.data_as<float>(), gm.data_as<float>(),
                         gr.data_as<float>());
      require_close(to_host(gy, *c.gpu), y, 1e-5, "layer_norm y");
      require_close(to_host(gr, *c.gpu), rstd, 1e-5, "layer_norm 1/std");
      layer_norm_backward(*c.cpu, x.data(), w.data(), dy.data(), rows, cc, mean.data(), rstd.data(),
                          dx.data(), dwb.data(), dwb.data() + cc, accumulate);
      layer_norm_backward(*c.gpu, gx.data_as<float>(), gwt.data_as<float>(), gdy.data_as<float>(),
                          rows, cc, gm.data_as<float>(), gr.data_as<float>(), gdx.data_as<float>(),
                          gdwb.data_as<float>(), gdwb.data_as<float>() + cc, accumulate);
      require_close(to_host(gdx, *c.gpu), dx, 1e-4, "layer_norm dx");
      require_close(to_host(gdwb, *c.gpu), dwb, 1e-4, "layer_norm dweight, dbias");
    }
  }
  {  // causal softmax over 3 matrices of 45 x 45, and its backward
    const std::size_t m = 3, t = 45;
    const auto s = test::hashed_vector(11, m * t * t, -4.0f, 4.0f),
               dp = test::hashed_vector(12, m * t * t);
    std::vector<float> p(m * t * t), ds(m * t * t);
    Tensor gs = to_gpu(s), gdp = to_gpu(dp), gp = to_gpu(p), gds = to_gpu(ds);
    causal_softmax_forward(*c.cpu, s.data(), p.data(), m, t);
    causal_softmax_forward(*c.gpu, gs.data_as<float>(), gp.data_as<float>(), m, t);
    const auto hp = to_host(gp, *c.gpu);
    require_close(hp, p, 1e-6, "causal softmax");
    for (std::size_t i = 0; i + 1 < t; ++i) CHECK(hp[i * t + t - 1] == 0.0f);  // the future
    causal_softmax_backward(*c.cpu, p.data(), dp.data(), ds.data(), m, t, 0.25f);
    causal_softmax_backward(*c.gpu, gp.data_as<float>(), gdp.data_as<float>(), gds.data_as<float>(),
                            m, t, 0.25f);
    require_close(to_host(gds, *c.gpu), ds, 1e-5, "causal softmax backward");
    // In place, as the attention layer runs it.
    causal_softmax_forward(*c.gpu, gs.data_as<float>(), gs.data_as<float>(), m, t);
    CHECK(to_host(gs, *c.gpu) == hp);
  }
  {  // strided-batched GEMM on views with leading dimensions wider than the matrices
    const std::size_t batch = 4, m = 9, n = 13, k = 7, lda = 24, ldb = 24, ldc = 20;
    for (bool ta : {false, true})
      for (bool tb : {false, true}) {
        const std::size_t sa = 300, sb = 400, sc = 200;
        const auto a = test::hashed_vector(13, batch * sa), b = test::hashed_vector(14, batch * sb);
        auto cc = test::hashed_vector(15, batch * sc);
        Tensor ga = to_gpu(a), gb = to_gpu(b), gc = to_gpu(cc);
        gemm_strided_batched(*c.cpu, ta, tb, m, n, k, 0.5f, a.data(), lda, sa, b.data(), ldb, sb,
                             0.25f, cc.data(), ldc, sc, batch);
        gemm_strided_batched(*c.gpu, ta, tb, m, n, k, 0.5f, ga.data_as<float>(), lda, sa,
                             gb.data_as<float>(), ldb, sb, 0.25f, gc.data_as<float>(), ldc, sc,
                             batch);
        require_close(to_host(gc, *c.gpu), cc, 1e-5, "strided-batched gemm");
      }
  }
  {  // gelu_tanh
    const auto x = test::hashed_vector(16, 1000, -6.0f, 6.0f), dy = test::hashed_vector(17, 1000);
    std::vector<float> y(1000), dx(1000);
    Tensor gx = to_gpu(x), gdy = to_gpu(dy), gy = to_gpu(y), gdx = to_gpu(dx);
    gelu_tanh_forward(*c.cpu, x.data(), y.data(), 1000);
    gelu_tanh_forward(*c.gpu, gx.data_as<float>(), gy.data_as<float>(), 1000);
    gelu_tanh_backward(*c.cpu, x.data(), dy.data(), dx.data(), 1000);
    gelu_tanh_backward(*c.gpu, gx.data_as<float>(), gdy.data_as<float>(), gdx.data_as<float>(),
                       1000);
    require_close(to_host(gy, *c.gpu), y, 1e-6, "gelu_tanh");
    require_close(to_host(gdx, *c.gpu), dx, 1e-6, "gelu_tanh backward");
  }
}

TEST_CASE("gpu per-token cross-entropy over a wide vocabulary (a block per row) matches the CPU",
          "[gpu][transformer]") {
  Contexts c;
  const std::size_t rows = 70, classes = 5003;
  auto z = test::hashed_vector(30, rows * classes, -6.0f, 6.0f);
  z[5 * classes + 4000] = z[5 * classes + 4001] = 50.0f;  // a tie: the first index wins
  std::vector<std::int32_t> labels(rows);
  for (std::size_t i = 0; i < rows; ++i) labels[i] = static_cast<std::int32_t>((i * 71) % classes);
  labels[5] = 4000;
  labels[9] = -100;  // ignored: no loss, no gradient, not counted
  Tensor gz = to_gpu(z), gl = to_gpu(labels), loss = Tensor::empty({rows}, DType::f32, kGpu),
         correct = Tensor::empty({rows}, DType::i32, kGpu),
         gdz = Tensor::empty({rows * classes}, DType::f32, kGpu);
  const auto rc = softmax_cross_entropy_forward(*c.cpu, z.data(), labels.data(), rows, classes,
                                                nullptr, nullptr);
  const auto rg = softmax_cross_entropy_forward(
      *c.gpu, gz.data_as<float>(), gl.data_as<std::int32_t>(), rows, classes, loss.data_as<float>(),
      correct.data_as<std::int32_t>());
  CHECK(rg.loss_sum == Approx(rc.loss_sum).epsilon(1e-5));
  CHECK(rg.correct == rc.correct);
  CHECK(rg.correct >= 1);
  CHECK(rg.counted == rows - 1);
  for (float smoothing : {0.0f, 0.1f}) {
    std::vector<float> dz(rows * classes);
    softmax_cross_entropy_backward(*c.cpu, z.data(), labels.data(), rows, classes, 0.01f, dz.data(),
                                   smoothing);
    softmax_cross_entropy_backward(*c.gpu, gz.data_as<float>(), gl.data_as<std::int32_t>(), rows,
                                   classes, 0.01f, gdz.data_as<float>(), smoothing);
    require_close(to_host(gdz, *c.gpu), dz, 1e-5, "wide softmax ce backward");
  }
  labels[17] = static_cast<std::int32_t>(classes);
  Tensor bad = to_gpu(labels);
  CHECK_THROWS_WITH(softmax_cross_entropy_forward(
                        *c.gpu, gz.data_as<float>(), bad.data_as<std::int32_t>(), rows, classes,
                        loss.data_as<float>(), correct.data_as<std::int32_t>()),
                    Catch::Contains("of batch row 17"));
}

TEST_CASE("gpu causal_self_attention with dropout matches the CPU layer", "[gpu][transformer]") {
  Contexts c;
  const DropoutContext dc{3, 1, 17};
  const ModelSpec spec = ModelSpec::parse("causal_self_attention(heads=3, dropout=0.2)");
  const Shape in{33, 24};
  const std::size_t batch = 3, n = batch * 33 * 24;
  auto lc = make_layer(spec.layers[0], in, "attn", 4, *c.cpu, batch, dc);
  auto lg = make_layer(spec.layers[0], in, "attn", 4, *c.gpu, batch, dc);
  const std::size_t np = 4 * 24 * 24 + 4 * 24;
  const auto params = test::hashed_vector(20, np, -0.3f, 0.3f);
  std::vector<float> grads(np);
  Tensor gparams = to_gpu(params), ggrads = to_gpu(grads);
  std::vector<float> params_c = params;
  lc->bind(params_c.data(), grads.data());
  lg->bind(gparams.data_as<float>(), ggrads.data_as<float>());
  const auto x = test::hashed_vector(21, n), dy = test::hashed_vector(22, n);
  std::vector<float> y(n), dx(n);
  Tensor gx = to_gpu(x), gdy = to_gpu(dy), gy = to_gpu(y), gdx = to_gpu(dx);
  for (bool training : {false, true}) {
    lc->forward(x.data(), y.data(), batch, training);
    lg->forward(gx.data_as<float>(), gy.data_as<float>(), batch, training);
    require_close(to_host(gy, *c.gpu), y, 1e-4, training ? "attention y (dropout)" : "attention y");
  }
  lc->backward(x.data(), y.data(), dy.data(), dx.data(), batch, false);
  lg->backward(gx.data_as<float>(), gy.data_as<float>(), gdy.data_as<float>(), gdx.data_as<float>(),
               batch, false);
  require_close(to_host(gdx, *c.gpu), dx, 1e-4, "attention dx");
  require_close(to_host(ggrads, *c.gpu), grads, 1e-4, "attention parameter gradients");
}

TEST_CASE("gpu fused attention: the unfused GPU path and the CPU agree; the kernels repeat",
          "[gpu][transformer][fused_attention]") {
  Contexts c;
  const DropoutContext dc{3, 1, 17};
  const Shape in{70, 128};  // T = 70 spans a partial tile of 64 queries and of 32 keys
  const std::size_t batch = 2, n = batch * 70 * 128;
  for (float dropout : {0.0f, 0.1f}) {
    CAPTURE(dropout);
    auto make = [&](const ComputeContext& ctx, AttentionKernel k) {
      return std::make_unique<CausalSelfAttentionLayer>("attn", in, 2, ctx, batch, dropout, 4, &dc,
                                                        k);
    };
    auto lc = make(*c.cpu, AttentionKernel::automatic);
    auto lf = make(*c.gpu, AttentionKernel::fused);
    auto lu = make(*c.gpu, AttentionKernel::automatic);
    CHECK_FALSE(lc->fused());
    CHECK(lf->fused());
    CHECK_FALSE(lu->fused());  // the GPU's default at a P this small
    const std::size_t np = 4 * 128 * 128 + 4 * 128;
    const auto params = test::hashed_vector(30, np, -0.1f, 0.1f);
    std::vector<float> params_c = params, grads(np);
    lc->bind(params_c.data(), grads.data());
    Tensor pf = to_gpu(params), gf = to_gpu(grads), pu = to_gpu(params), gu = to_gpu(grads);
    lf->bind(pf.data_as<float>(), gf.data_as<float>());
    lu->bind(pu.data_as<float>(), gu.data_as<float>());
    const auto x = test::hashed_vector(31, n), dy = test::hashed_vector(32, n);
    std::vector<float> y(n), dx(n);
    Tensor gx = to_gpu(x), gdy = to_gpu(dy);
    Tensor yf = to_gpu(y), yu = to_gpu(y), dxf = to_gpu(dx), dxu = to_gpu(dx);
    lc->forward(x.data(), y.data(), batch, true);
    lf->forward(gx.data_as<float>(), yf.data_as<float>(), batch, true);
    lu->forward(gx.data_as<float>(), yu.data_as<float>(), batch, true);
    lc->backward(x.data(), y.data(), dy.data(), dx.data(), batch, false);
    lf->backward(gx.data_as<float>(), yf.data_as<float>(), gdy.data_as<float>(),
                 dxf.data_as<float>(), batch, false);
    lu->backward(gx.data_as<float>(), yu.data_as<float>(), gdy.data_as<float>(),
                 dxu.data_as<float>(), batch, false);
    require_close(to_host(yf, *c.gpu), y, 1e-4, "fused y vs CPU");
    require_close(to_host(yu, *c.gpu), y, 1e-4, "unfused y vs CPU");
    require_close(to_host(yf, *c.gpu), to_host(yu, *c.gpu), 1e-4, "fused y vs unfused");
    require_close(to_host(dxf, *c.gpu), dx, 1e-4, "fused dx vs CPU");
    require_close(to_host(dxf, *c.gpu), to_host(dxu, *c.gpu), 1e-4, "fused dx vs unfused");
    require_close(to_host(gf, *c.gpu), grads, 1e-4, "fused gradients vs CPU");
    require_close(to_host(gf, *c.gpu), to_host(gu, *c.gpu), 1e-4, "fused gradients vs unfused");
  }
  // The kernels against their CPU emulation (heads of 32, 64 and 128), twice
  // on the GPU: the same bits.
  for (std::size_t d : {32, 64, 128}) {
    CAPTURE(d);
    const FusedAttentionShape s{2, 100, 2 * d, 2, 0.2f, dropout_mask_key(1, 0, 2, 3)};
    const auto qkv = test::hashed_vector(40, s.batch * s.t * 3 * s.c, -1.0f, 1.0f);
    const auto d_o = test::hashed_vector(41, s.batch * s.t * s.c);
    const std::size_t rows = s.batch * s.heads * s.t;
    std::vector<float> o(s.batch * s.t * s.c), lse(rows), delta(rows), d_qkv(qkv.size());
    fused_attention_forward(*c.cpu, s, qkv.data(), o.data(), lse.data(), "attn");
    fused_attention_backward(*c.cpu, s, qkv.data(), o.data(), d_o.data(), lse.data(), delta.data(),
                             d_qkv.data());
    Tensor gqkv = to_gpu(qkv), gdo = to_gpu(d_o), go = to_gpu(o), gl = to_gpu(lse),
           gdelta = to_gpu(delta), gdqkv = to_gpu(d_qkv);
    std::vector<float> first_o, first_d;
    for (int repeat = 0; repeat < 2; ++repeat) {
      fused_attention_forward(*c.gpu, s, gqkv.data_as<float>(), go.data_as<float>(),
                              gl.data_as<float>(), "attn");
      fused_attention_backward(*c.gpu, s, gqkv.data_as<float>(), go.data_as<float>(),
                               gdo.data_as<float>(), gl.data_as<float>(), gdelta.data_as<float>(),
                               gdqkv.data_as<float>());
      const auto ho = to_host(go, *c.gpu), hd = to_host(gdqkv, *c.gpu);
      if (repeat == 0) {
        require_close(ho, o, 1e-4, "fused O vs its CPU emulation");
        require_close(to_host(gl, *c.gpu), lse, 1e-4, "log-sum-exp vs the CPU emulation");
        require_close(hd, d_qkv, 1e-4, "fused dQ, dK, dV vs the CPU emulation");
        first_o = ho;
        first_d = hd;
      } else {
        CHECK(ho == first_o);
        CHECK(hd == first_d);
      }
    }
  }
}

TEST_CASE("gpu gpt-nano forward and backward match the CPU model, and repeat bit for bit",
          "[gpu][transformer]") {
  Contexts c;  // c.gpu only reads results back, after mg->synchronize()
  for (const char* preset : {"gpt-nano", "gpt-nano:dropout=0.1"}) {
    CAPTURE(preset);
    const ModelSpec spec = ModelSpec::parse(preset);
    ModelOptions oc, og;
    oc.seed = og.seed = 9;
    oc.max_batch = og.max_batch = 3;
    og.device = kGpu;
    og.tf32 = Tf32Mode::off;
    auto mc = Model::build(spec, {128}, 61, oc);
    auto mg = Model::build(spec, {128}, 61, og);
    REQUIRE(mg->param_count() == mc->param_count());
    const std::size_t batch = 3, tokens = batch * 128;
    std::vector<float> ids(tokens);
    std::vector<std::int32_t> labels(tokens);
    for (std::size_t i = 0; i < tokens; ++i) {
      ids[i] = static_cast<float>((i * 13 + i / 7) % 61);
      labels[i] = static_cast<std::int32_t>((i * 13 + 5) % 61);
    }
    labels[7] = -100;  // the ignore label
    Tensor gids = to_gpu(ids), gl = to_gpu(labels);
    mc->set_dropout_context(1, 4);
    mg->set_dropout_context(1, 4);
    const auto rc = mc->forward(ids.data(), labels.data(), batch, true);
    const auto rg = mg->forward(gids.data_as<float>(), gl.data_as<std::int32_t>(), batch, true);
    CHECK(rg.loss_sum == Approx(rc.loss_sum).epsilon(1e-4));
    mc->backward(1.0f, false);
    mg->backward(1.0f, false);
    mg->synchronize();
    const BufferView gc = mc->grads();
    const std::vector<float> cpu_grads(gc.as<float>(), gc.as<float>() + gc.count);
    const auto gpu_grads = to_host(mg->grads().as<float>(), mg->param_count(), *c.gpu);
    require_close(gpu_grads, cpu_grads, 1e-3, "gpt-nano gradients");
    // The same step again on the GPU: bit for bit (no float atomics anywhere).
    const auto again = mg->forward(gids.data_as<float>(), gl.data_as<std::int32_t>(), batch, true);
    CHECK(again.loss_sum == rg.loss_sum);
    mg->backward(1.0f, false);
    mg->synchronize();
    CHECK(to_host(mg->grads().as<float>(), mg->param_count(), *c.gpu) == gpu_grads);
    // Evaluation: no dropout, the same loss on both.
    const auto ec = mc->forward(ids.data(), labels.data(), batch, false);
    const auto eg = mg->forward(gids.data_as<float>(), gl.data_as<std::int32_t>(), batch, false);
    CHECK(eg.loss_sum == Approx(ec.loss_sum).epsilon(1e-4));
  }
}

int main(int argc, char** argv) {
  if (!ringtrain::test::cuda_device_available()) return ringtrain::test::kSkippedExitCode;
  cuda_set_device(0);
  return Catch::Session().run(argc, argv);
}
