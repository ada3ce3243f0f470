// --precision bf16|fp16 on the GPU's tensor cores: the 16-bit GEMM path
// (cublasGemmEx on exact 16-bit copies, fp32 accumulation and output) against
// the fp32 product of the same on-grid values, and whole bf16 train steps
// (resnet20, gpt-nano) against the CPU's bf16 run, which rounds instead.
// Exits 77 (ctest: skipped) without CUDA or a device.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "kernels/precision.cuh"
#include "ops/gpu_ops.h"
#include "ringtrain/core/buffer_copy.h"
#include "ringtrain/core/error.h"
#include "ringtrain/launch/gpu_runtime.h"
#include "ringtrain/model/model.h"
#include "ringtrain/ops/conv2d.h"
#include "ringtrain/ops/gemm.h"
#include "ringtrain/ops/precision.h"
#include "ringtrain/tensor/tensor.h"
#include "tests/model/grid_values.h"
#include "tests/model/test_data.h"
#include "tests/support/gpu_compare.h"
#include "tests/support/gpu_test.h"

using namespace ringtrain;
using namespace ringtrain::test;

namespace {

// Relative L2 distance, for whole-model comparisons.
double relative_l2(const std::vector<float>& got, const std::vector<float>& want) {
  double num = 0, den = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    num += (static_cast<double>(got[i]) - want[i]) * (static_cast<double>(got[i]) - want[i]);
    den += static_cast<double>(want[i]) * want[i];
  }
  return std::sqrt(num / den);
}

}  // namespace

TEST_CASE("gpu rounding and 16-bit casts give the CPU's bits at every alignment and length",
          "[gpu][precision]") {
  // The kernels move four values at a time where the pointers allow and take
  // the rest one by one: offsets 0-3 floats and lengths around multiples of 4.
  const std::size_t most = 4100;
  std::vector<float> x = test::hashed_vector(21, most + 4);
  x[5] = 65519.0f, x[6] = 1e-8f, x[7] = -0.0f, x[8] = 3.0e38f;  // fp16 edges, bf16 overflow
  const Tensor gx = to_gpu(x);
  for (const DType p : {DType::bf16, DType::f16}) {
    auto ctx = ComputeContext::create(kGpu, Tf32Mode::off, p);
    const DType code = p;
    for (std::size_t offset = 0; offset < 4; ++offset)
      for (const std::size_t n : {std::size_t{1}, std::size_t{3}, std::size_t{4}, std::size_t{5},
                                  std::size_t{1023}, most}) {
        CAPTURE(precision_name(p), offset, n);
        const float* src = gx.data_as<float>() + offset;
        std::vector<float> want(n);
        for (std::size_t i = 0; i < n; ++i)
          want[i] = kernels::round_to_precision_grid(x[offset + i], code);
        Tensor rounded = to_gpu(std::vector<float>(n + 4, 0.0f));
        round_to_precision(*ctx, rounded.data_as<float>() + offset, src, n, p);
        const auto got = to_host(rounded.data_as<float>() + offset, n, *ctx);
        REQUIRE(std::memcmp(got.data(), want.data(), n * sizeof(float)) == 0);
        // 16-bit bits out and back: the grid values again, at a shifted destination too.
        Tensor bits = Tensor::empty({(n + 8) / 2 + 1}, DType::f32, kGpu);  // n + 8 uint16
        auto* b16 = reinterpret_cast<std::uint16_t*>(bits.data()) + offset;
        detail::gpu_to_precision_bits(ctx->stream(), b16, src, n, code);
        Tensor back = to_gpu(std::vector<float>(n + 4, 0.0f));
        detail::gpu_from_precision_bits(ctx->stream(), back.data_as<float>() + (3 - offset), b16, n,
                                        code);
        const auto round_trip = to_host(back.data_as<float>() + (3 - offset), n, *ctx);
        REQUIRE(std::memcmp(round_trip.data(), want.data(), n * sizeof(float)) == 0);
      }
  }
}

TEST_CASE("gpu 16-bit gemm: exact 16-bit inputs, fp32 accumulation, within fp32 rounding",
          "[gpu][precision]") {
  for (const DType p : {DType::bf16, DType::f16}) {
    CAPTURE(precision_name(p));
    auto ctx = ComputeContext::create(kGpu, Tf32Mode::off, p);
    const std::size_t m = 37, n = 129, k = 300;
    for (bool ta : {false, true})
      for (bool tb : {false, true}) {
        CAPTURE(ta, tb);
        const auto a = on_grid(test::hashed_vector(1, m * k), p);
        const auto b = on_grid(test::hashed_vector(2, k * n), p);
        const auto c0 = test::hashed_vector(3, m * n);
        const std::size_t lda = ta ? m : k, ldb = tb ? k : n;
        Tensor ga = to_gpu(a), gb = to_gpu(b), gc = to_gpu(c0);
        const float alpha = 0.7f, beta = 0.3f;
        gemm(*ctx, ta, tb, m, n, k, alpha, ga.data_as<float>(), lda, gb.data_as<float>(), ldb, beta,
             gc.data_as<float>(), n, p);
        const auto got = to_host(gc, *ctx);
        // A product of two bf16 (8-bit) or fp16 (11-bit) significands is exact
        // in fp32, and TF32 holds both exactly, so the TF32 product of grid
        // values differs from the exact sum only by fp32 accumulation: |error| <= k u (|alpha| sum
        // |a b| + |beta c|) with u = 2^-24 (and a factor 2 for the final scale and add).
        std::size_t wrong = 0;
        for (std::size_t i = 0; i < m; ++i)
          for (std::size_t j = 0; j < n; ++j) {
            double exact = 0, magnitude = 0;
            for (std::size_t l = 0; l < k; ++l) {
              const double av = a[ta ? l * lda + i : i * lda + l];
              const double bv = b[tb ? j * ldb + l : l * ldb + j];
              exact += av * bv;
              magnitude += std::abs(av * bv);
            }
            const double c = c0[i * n + j];
            const double want = alpha * exact + beta * c;
            const double bound = 2.0 * static_cast<double>(k + 2) * 0x1p-24 *
                                 (alpha * magnitude + beta * std::abs(c));
            wrong += !(std::abs(got[i * n + j] - want) <= bound);
          }
        CHECK(wrong == 0);
      }
  }
}

TEST_CASE("gpu 16-bit gemm: fp32 operands and an fp32 context keep the fp32 product bit for bit",
          "[gpu][precision]") {
  auto fp32 = ComputeContext::create(kGpu, Tf32Mode::off);
  auto bf16 = ComputeContext::create(kGpu, Tf32Mode::off, DType::bf16);
  const auto a = test::hashed_vector(4, 64 * 64), b = test::hashed_vector(5, 64 * 64);
  Tensor ga = to_gpu(a), gb = to_gpu(b), c1 = to_gpu(std::vector<float>(64 * 64)),
         c2 = to_gpu(std::vector<float>(64 * 64)), c3 = to_gpu(std::vector<float>(64 * 64));
  // Off-grid values, no grid vouched for: the plain fp32 product on either context.
  gemm(*fp32, false, false, 64, 64, 64, 1.0f, ga.data_as<float>(), 64, gb.data_as<float>(), 64,
       0.0f, c1.data_as<float>(), 64);
  gemm(*bf16, false, false, 64, 64, 64, 1.0f, ga.data_as<float>(), 64, gb.data_as<float>(), 64,
       0.0f, c2.data_as<float>(), 64);
  // A grid that is not the context's is not taken either.
  gemm(*bf16, false, false, 64, 64, 64, 1.0f, ga.data_as<float>(), 64, gb.data_as<float>(), 64,
       0.0f, c3.data_as<float>(), 64, DType::f16);
  const auto r1 = to_host(c1, *fp32);
  CHECK(to_host(c2, *bf16) == r1);
  CHECK(to_host(c3, *bf16) == r1);
  // The in-place 16-bit product takes 16-bit operands only: an fp32 one is
  // an error that names the dtypes (nothing is cast behind the caller's back).
  const BufferView a32 = view_of(ga.data_as<float>(), 64 * 64, kGpu);
  CHECK_THROWS_WITH(gemm_stored(*bf16, false, false, 64, 64, 64, 1.0f, a32, 64, a32, 64, 0.0f,
                                c3.data_as<float>(), 64),
                    Catch::Contains("a 16-bit product of f32 and f32"));
}

namespace {

std::vector<float> magnitudes(std::vector<float> v) {
  for (float& x : v) x = std::abs(x);
  return v;
}

// |got - want| <= u16 (|want| + 2 g M) + 2 g M, where M is the same
// convolution of the magnitudes (the sum of |x w| per output), g = terms *
// 2^-23 bounds an fp32 accumulation's error on either side, and u16 (2^-8
// bf16, 2^-11 fp16) the final rounding of the 16-bit output.
std::size_t outside_bound(const std::vector<float>& got, const std::vector<float>& want,
                          const std::vector<float>& magnitude, std::size_t terms, DType p) {
  const double u16 = p == DType::bf16 ? 0x1p-8 : 0x1p-11;
  const double g = static_cast<double>(terms) * 0x1p-23;
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double slack = 2 * g * magnitude[i];
    wrong += !(std::abs(static_cast<double>(got[i]) - want[i]) <=
               u16 * (std::abs(want[i]) + slack) + slack);
  }
  return wrong;
}

}  // namespace

TEST_CASE("gpu 16-bit conv2d: forward and backward data on 16-bit tensors, dw in fp32",
          "[gpu][precision]") {
  auto cpu = ComputeContext::create(Device::cpu());
  for (const DType p : {DType::bf16, DType::f16})
    for (const Layout layout : {Layout::nchw, Layout::nhwc})
      for (Conv2dGeometry g :
           {Conv2dGeometry{16, 13, 11, 32, 3, 1, 1}, Conv2dGeometry{8, 9, 9, 16, 3, 2, 0},
            Conv2dGeometry{32, 7, 7, 16, 1, 1, 0}}) {
        g.layout = layout;
        CAPTURE(precision_name(p), layout == Layout::nhwc, g.in_channels, g.kernel);
        auto ctx = ComputeContext::create(kGpu, Tf32Mode::off, p);
        const std::size_t batch = 5;
        const std::size_t in = batch * g.in_channels * g.height * g.width;
        const std::size_t out = batch * g.out_channels * g.out_height() * g.out_width();
        const std::size_t wn = g.out_channels * g.in_channels * g.kernel * g.kernel;
        const auto x = on_grid(test::hashed_vector(9, in), p);
        const auto w = on_grid(test::hashed_vector(10, wn), p);
        const auto dy = on_grid(test::hashed_vector(12, out), p);
        std::vector<float> y(out), dx(in), dw(wn), my(out), mdx(in), scratch(wn);
        Conv2dOp cpu_op(*cpu, g, batch), gpu_op(*ctx, g, batch);
        Tensor gx = to_gpu(x), gw = to_gpu(w), gdy = to_gpu(dy), gy = to_gpu(y), gdx = to_gpu(dx),
               gdw = to_gpu(dw);
        cpu_op.forward(x.data(), w.data(), nullptr, y.data(), batch);
        cpu_op.backward(x.data(), w.data(), dy.data(), dx.data(), dw.data(), nullptr, batch, false);
        const auto ax = magnitudes(x), aw = magnitudes(w), ady = magnitudes(dy);
        cpu_op.forward(ax.data(), aw.data(), nullptr, my.data(), batch);
        cpu_op.backward(ax.data(), aw.data(), ady.data(), mdx.data(), scratch.data(), nullptr,
                        batch, false);
        gpu_op.forward(gx.data_as<float>(), gw.data_as<float>(), nullptr, gy.data_as<float>(),
                       batch);
        const auto y16 = to_host(gy, *ctx);
        // The fp32 interface of a 16-bit context rounds its output to the grid.
        std::size_t off_grid = 0;
        for (const float v : y16) off_grid += kernels::round_to_precision_grid(v, p) != v;
        CHECK(off_grid == 0);
        const std::size_t ckk = g.in_channels * g.kernel * g.kernel;
        CHECK(outside_bound(y16, y, my, ckk, p) == 0);
        gpu_op.backward(gx.data_as<float>(), gw.data_as<float>(), gdy.data_as<float>(),
                        gdx.data_as<float>(), gdw.data_as<float>(), nullptr, batch, false);
        const std::size_t dx_terms = g.out_channels * g.kernel * g.kernel;
        CHECK(outside_bound(to_host(gdx, *ctx), dx, mdx, dx_terms, p) == 0);
        // Backward filter in fp32 (TF32 products of grid values are exact): as
        // tight as fp32's test.
        require_close(to_host(gdw, *ctx), dw, 1e-4, "16-bit conv dw");
      }
}

namespace {

// One bf16 train step's loss and gradients, on the GPU (16-bit GEMMs) and on
// the CPU (rounding around fp32 products), from the same master weights.
// `gradient_tolerance` bounds the relative L2 distance of all the gradients.
void compare_bf16_step(const char* preset, const std::vector<std::size_t>& input_shape, int classes,
                       const std::vector<float>& x, const std::vector<std::int32_t>& labels,
                       std::size_t batch, double gradient_tolerance) {
  CAPTURE(preset);
  const ModelSpec spec = ModelSpec::parse(preset);
  ModelOptions oc, og;
  oc.seed = og.seed = 11;
  oc.max_batch = og.max_batch = batch;
  oc.precision = og.precision = DType::bf16;
  oc.layout = LayoutChoice::nchw;
  og.device = kGpu;
  og.tf32 = Tf32Mode::off;
  auto mc = Model::build(spec, input_shape, classes, oc);
  auto mg = Model::build(spec, input_shape, classes, og);
  REQUIRE(mg->param_count() == mc->param_count());
  Tensor gx = to_gpu(x), gl = to_gpu(labels);
  const auto rc = mc->forward(x.data(), labels.data(), batch, true);
  const auto rg = mg->forward(gx.data_as<float>(), gl.data_as<std::int32_t>(), batch, true);
  // Both runs hold every activation on the bf16 grid, and an fp32
  // accumulation-order difference (cuBLAS/cuDNN against OpenBLAS/oneDNN) can
  // move a value across a rounding boundary, i.e. by one bf16 step (2^-8
  // relative). The loss stays within a few steps of 2^-8; how far the
  // gradients move depends on the model (see the callers).
  CHECK(rg.loss_sum == Approx(rc.loss_sum).epsilon(1e-2));
  // The logits are stored in bf16 on the GPU too (exact: a missing rounding
  // of the last node shows here whatever the tolerance below).
  const std::size_t logit_count = batch * mg->rows_per_sample() * static_cast<std::size_t>(classes);
  CHECK(mg->logits().dtype == DType::bf16);
  std::vector<float> logits(logit_count);
  mg->copy_logits(0, logits.data(), logits.size());
  std::size_t off_grid = 0;
  for (const float v : logits) off_grid += kernels::round_to_bf16_grid(v) != v;
  CHECK(off_grid == 0);
  mc->backward(1.0f, false);
  mg->backward(1.0f, false);
  mg->synchronize();
  const BufferView gc = mc->grads();
  const std::vector<float> cpu(gc.as<float>(), gc.as<float>() + gc.count);
  const auto gpu =
      to_host(mg->grads().as<float>(), mg->param_count(), *ComputeContext::create(kGpu));
  CHECK(relative_l2(gpu, cpu) <= gradient_tolerance);
}

}  // namespace

TEST_CASE("gpu bf16 train steps on tensor cores match the CPU's bf16 rounding run",
          "[gpu][precision]") {
  {
    const std::size_t batch = 8;
    const auto x = test::hashed_vector(21, batch * 3 * 32 * 32, -1.0f, 1.0f);
    std::vector<std::int32_t> labels(batch);
    for (std::size_t i = 0; i < batch; ++i) labels[i] = static_cast<std::int32_t>((i * 7) % 10);
    // resnet20's bf16 gradients at batch 8 move far under any one-step flip:
    // measured on the CPU with this input, labels and seed, two bf16 runs that
    // differ only in the convolutions' fp32 accumulation order
    // (RINGTRAIN_CPU_CONV=onednn against im2col, whose fp32 gradients agree to
    // 1.8e-6) are 0.19 apart; moving one input element by one bf16 step moves
    // the gradients by 0.18 to 0.22 (20 elements); BN gammas scaled by
    // 1 + 2^-23 (fp32's last bit), 0.18; bf16 against fp32 is 0.28. (Batch 32:
    // 0.12 to 0.13; batch 128: 0.06 to 0.08.) The GPU's fp32 accumulation is
    // one more such perturbation (an H100 gave 0.166), so 0.3 is this spread
    // with a margin: it catches gross errors (a layout, stale or wrong weights,
    // a wrong gradient routing), not one missing rounding step, which moves
    // the gradients no more than a flip does; those are the per-op cases above,
    // the logits' grid check, and the CPU tests of where each side rounds
    // (cpu_conv_backend_test, model_test).
    compare_bf16_step("resnet20", {3, 32, 32}, 10, x, labels, batch, 0.3);
  }
  {
    const std::size_t batch = 2, tokens = batch * 128;
    std::vector<float> ids(tokens);
    std::vector<std::int32_t> labels(tokens);
    for (std::size_t i = 0; i < tokens; ++i) {
      ids[i] = static_cast<float>((i * 13 + i / 7) % 61);
      labels[i] = static_cast<std::int32_t>((i * 13 + 5) % 61);
    }
    compare_bf16_step("gpt-nano", {128}, 61, ids, labels, batch, 3e-2);
  }
}

// GPT-2's head at a vocabulary that pads (1000 -> 1024 columns): the GPU's
// fused classifier (softmax, loss and the logits' gradient in one pass, in
// place) gives the bits of its two passes, as Model promises, the padded
// columns stay zeros, and the step matches the CPU's within gpt-nano's
// tolerance above. The other model tests' vocabularies (61, 64) pad by 3 or
// not at all, and the fused loss's op test has no model around it.
TEST_CASE("gpu bf16 gpt-nano of vocabulary 1000: the fused classifier on padded rows",
          "[gpu][precision][padded]") {
  const std::size_t batch = 2, context = 128, vocab = 1000, rows = batch * context;
  ModelOptions oc, og;
  oc.seed = og.seed = 5;
  oc.max_batch = og.max_batch = batch;
  oc.precision = og.precision = DType::bf16;
  og.device = kGpu;
  og.tf32 = Tf32Mode::off;
  const ModelSpec spec = ModelSpec::parse("gpt-nano");
  auto mc = Model::build(spec, {context}, static_cast<int>(vocab), oc);
  auto mg = Model::build(spec, {context}, static_cast<int>(vocab), og);
  REQUIRE(mg->logits_row_stride() == 1024);
  REQUIRE(mc->logits_row_stride() == 1024);
  std::vector<float> ids(rows);
  std::vector<std::int32_t> labels(rows);
  const std::vector<float> u = test::hashed_vector(43, rows, 0.0f, 1.0f);
  for (std::size_t i = 0; i < rows; ++i) {
    ids[i] = static_cast<float>(static_cast<std::size_t>(u[i] * vocab) % vocab);
    labels[i] = i % 11 == 4 ? -100 : static_cast<std::int32_t>((i * 37 + 3) % vocab);
  }
  Tensor gx = to_gpu(ids), gl = to_gpu(labels);
  const float* x = gx.data_as<float>();
  const std::int32_t* l = gl.data_as<std::int32_t>();
  const auto gpu_ctx = ComputeContext::create(kGpu);
  auto gpu_grads = [&] { return to_host(mg->grads().as<float>(), mg->param_count(), *gpu_ctx); };

  // Evaluation: the padded columns hold zeros, as the model keeps them.
  mg->forward(x, l, batch, false);
  mg->synchronize();
  const BufferView z = mg->logits();
  REQUIRE(z.dtype == DType::bf16);
  REQUIRE(z.count == rows * 1024);
  std::vector<std::uint16_t> words(z.count);
  copy_view(BufferView{words.data(), words.size(), DType::bf16, Device::cpu()}, z);
  mg->synchronize();
  std::size_t padding_nonzero = 0;
  for (std::size_t r = 0; r < rows; ++r)
    for (std::size_t j = vocab; j < 1024; ++j) padding_nonzero += words[r * 1024 + j] != 0;
  CHECK(padding_nonzero == 0);

  const float scale = 0.5f;
  mg->forward_accumulate_fused_loss(x, l, batch, scale);
  mg->backward(scale, false);
  const Model::LossResult fused_loss = mg->take_loss_totals();
  const std::vector<float> fused = gpu_grads();
  mg->forward_accumulate(x, l, batch, true);
  mg->backward(scale, false);
  const Model::LossResult two_loss = mg->take_loss_totals();
  const std::vector<float> two = gpu_grads();
  CHECK(fused_loss.loss_sum == two_loss.loss_sum);
  CHECK(fused_loss.correct == two_loss.correct);
  std::size_t differ = 0;
  for (std::size_t i = 0; i < fused.size(); ++i)
    differ += std::memcmp(&fused[i], &two[i], sizeof(float)) != 0;
  CAPTURE(relative_l2(fused, two));
  CHECK(differ == 0);

  mc->forward_accumulate_fused_loss(ids.data(), labels.data(), batch, scale);
  mc->backward(scale, false);
  const Model::LossResult cpu_loss = mc->take_loss_totals();
  CHECK(fused_loss.loss_sum == Approx(cpu_loss.loss_sum).epsilon(1e-2));
  const BufferView gc = mc->grads();
  const std::vector<float> cpu(gc.as<float>(), gc.as<float>() + gc.count);
  CHECK(relative_l2(fused, cpu) <= 3e-2);
}

// The GPU's plan (stored layers, SDPA, the fused linear + GELU and their
// backward, channels-last convolutions) places its buffers by their lives as
// the CPU's does: with every block NaN once its life ends
// (RINGTRAIN_BUFFER_REUSE=poison), and with every block apart (off), a step
// gives the default plan's bits.
TEST_CASE("gpu buffers placed by their lives: the bits of every buffer apart, and of poison",
          "[gpu][memory]") {
  struct Case {
    const char* spec;
    std::vector<std::size_t> input;
    int classes;
  };
  for (const Case& c : {Case{"resnet20", {3, 16, 16}, 10}, Case{"gpt-nano", {128}, 61}}) {
    CAPTURE(c.spec);
    const std::size_t batch = 2;
    std::size_t per_sample = 1;
    for (std::size_t d : c.input) per_sample *= d;
    const bool tokens = c.input.size() == 1;
    const std::size_t rows = batch * (tokens ? c.input[0] : 1);
    std::vector<float> x = test::hashed_vector(7, batch * per_sample);
    if (tokens)
      for (std::size_t i = 0; i < x.size(); ++i)
        x[i] = static_cast<float>((i * 7 + 3) % static_cast<std::size_t>(c.classes));
    std::vector<std::int32_t> labels(rows);
    for (std::size_t i = 0; i < rows; ++i)
      labels[i] = static_cast<std::int32_t>((i * 5 + 1) % static_cast<std::size_t>(c.classes));
    Tensor gx = to_gpu(x), gl = to_gpu(labels);
    const auto gpu_ctx = ComputeContext::create(kGpu);
    std::vector<std::vector<float>> grads;
    std::vector<double> losses;
    for (const char* mode : {"", "off", "poison"}) {
      if (*mode == '\0')
        unsetenv("RINGTRAIN_BUFFER_REUSE");
      else
        setenv("RINGTRAIN_BUFFER_REUSE", mode, 1);
      ModelOptions o;
      o.seed = 3;
      o.max_batch = batch;
      o.precision = DType::bf16;
      o.device = kGpu;
      auto m = Model::build(ModelSpec::parse(c.spec), c.input, c.classes, o);
      unsetenv("RINGTRAIN_BUFFER_REUSE");
      m->forward_accumulate_fused_loss(gx.data_as<float>(), gl.data_as<std::int32_t>(), batch,
                                       0.5f);
      m->backward(0.5f, false);
      m->forward_accumulate(gx.data_as<float>(), gl.data_as<std::int32_t>(), batch, true);
      m->backward(0.5f, true);
      losses.push_back(m->take_loss_totals().loss_sum);
      grads.push_back(to_host(m->grads().as<float>(), m->param_count(), *gpu_ctx));
    }
    for (std::size_t k = 1; k < grads.size(); ++k) {
      CAPTURE(k);
      CHECK(losses[k] == losses[0]);
      CAPTURE(relative_l2(grads[k], grads[0]));
      std::size_t differ = 0;
      for (std::size_t i = 0; i < grads[0].size(); ++i)
        differ += std::memcmp(&grads[k][i], &grads[0][i], sizeof(float)) != 0;
      CHECK(differ == 0);
    }
  }
}

int main(int argc, char** argv) {
  if (!ringtrain::test::cuda_device_available()) return ringtrain::test::kSkippedExitCode;
  cuda_set_device(0);
  return Catch::Session().run(argc, argv);
}
