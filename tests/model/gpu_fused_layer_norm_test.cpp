// The fused residual add + LayerNorm on a GPU: the ops (kernels/
// residual_layer_norm.cu) against the same ops on the CPU under fp32, bf16 and
// fp16 storage, with and without an earlier fp32 gradient to add to, within
// fp32 accumulation error plus one 16-bit rounding (the row sums are split
// across a warp on the GPU, as the plain layer_norm's are); and gpt-nano on
// the GPU, fused against --fuse off on the same GPU, bit for bit (the fused
// kernels sum in the unfused kernels' order and round where they store).
// Exits 77 (ctest: skipped) without CUDA or a device.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <cstring>
#include <vector>

#include "kernels/layer_norm.cuh"
#include "ringtrain/launch/gpu_runtime.h"
#include "ringtrain/model/model.h"
#include "ringtrain/model/model_spec.h"
#include "ringtrain/ops/bias.h"
#include "ringtrain/ops/compute_context.h"
#include "ringtrain/ops/precision.h"
#include "ringtrain/ops/residual_layer_norm.h"
#include "ringtrain/ops/transformer_ops.h"
#include "ringtrain/tensor/tensor.h"
#include "tests/model/grid_values.h"
#include "tests/model/test_data.h"
#include "tests/support/gpu_compare.h"
#include "tests/support/gpu_test.h"

using namespace ringtrain;
using namespace ringtrain::test;

namespace {

Tensor floats(const std::vector<float>& v, Device device) {
  Tensor t = Tensor::empty({v.size()}, DType::f32, device);
  t.copy_from(Tensor::borrow(const_cast<float*>(v.data()), {v.size()}, DType::f32, Device::cpu()));
  return t;
}

struct Run {
  std::vector<float> sum, y, dx0, dx1, dw, db;
};

// g_type: the earlier contributions' dtype, fp32 (a summed gradient) or p
// (the residual stream's, which its other reader writes on the grid).
Run run(const ComputeContext& ctx, const ComputeContext& cpu, DType p, std::size_t rows,
        std::size_t c, bool summed, DType g_type = DType::f32) {
  const Device dev = ctx.device();
  const std::size_t n = rows * c;
  Tensor x0 = stored(hashed_vector(1, n, -2.0f, 2.0f), p, dev, cpu);
  Tensor x1 = stored(hashed_vector(2, n, -1.0f, 3.0f), p, dev, cpu);
  Tensor dy = stored(hashed_vector(3, n, -1.0f, 1.0f), p, dev, cpu);
  Tensor w = floats(hashed_vector(4, c, 0.5f, 1.5f), dev);
  Tensor b = floats(hashed_vector(5, c, -0.5f, 0.5f), dev);
  Tensor g = summed ? stored(hashed_vector(6, n, -1.5f, 1.5f), g_type, dev, cpu)
                    : Tensor::empty({n}, p, dev);
  Tensor sum = Tensor::empty({n}, p, dev), y = Tensor::empty({n}, p, dev);
  Tensor dx0 = Tensor::empty({n}, DType::f32, dev), dx1 = Tensor::empty({n}, p, dev);
  Tensor mean = Tensor::empty({rows}, DType::f32, dev),
         rstd = Tensor::empty({rows}, DType::f32, dev);
  Tensor grads = Tensor::zeros({2 * c}, DType::f32, dev);
  residual_layer_norm_forward(ctx, x0.buffer(), x1.buffer(), 0.5f, w.data_as<float>(),
                              b.data_as<float>(), rows, c, 1e-5f, sum.buffer(), y.buffer(),
                              mean.data_as<float>(), rstd.data_as<float>());
  residual_layer_norm_backward(ctx, sum.buffer(), w.data_as<float>(), dy.buffer(), rows, c,
                               mean.data_as<float>(), rstd.data_as<float>(), g.buffer(), summed,
                               0.5f, dx0.buffer(), dx1.buffer(), grads.data_as<float>(),
                               grads.data_as<float>() + c, false);
  Run out{widened_values(sum, ctx),
          widened_values(y, ctx),
          widened_values(dx0, ctx),
          widened_values(dx1, ctx),
          {},
          {}};
  const std::vector<float> gw = widened_values(grads, ctx);
  out.dw.assign(gw.begin(), gw.begin() + static_cast<std::ptrdiff_t>(c));
  out.db.assign(gw.begin() + static_cast<std::ptrdiff_t>(c), gw.end());
  return out;
}

}  // namespace

TEST_CASE("gpu residual_layer_norm ops against the CPU", "[gpu][fusion]") {
  Contexts c;
  const DType p = GENERATE(DType::f32, DType::bf16, DType::f16);
  const bool summed = GENERATE(false, true);
  // A 16-bit d_sum where the earlier contributions are on the grid.
  const DType g_type = summed ? GENERATE_COPY(DType::f32, p) : DType::f32;
  const std::size_t cols = GENERATE(33u, 128u, 768u);
  INFO(dtype_name(p) << (summed ? ", summed in " : "") << (summed ? dtype_name(g_type) : "")
                     << ", c " << cols);
  auto cpu = ComputeContext::create(Device::cpu(), Tf32Mode::off, p);
  auto gpu = ComputeContext::create(kGpu, Tf32Mode::off, p);
  const Run want = run(*cpu, *c.cpu, p, 37, cols, summed, g_type);
  const Run got = run(*gpu, *c.cpu, p, 37, cols, summed, g_type);
  const double tol = p == DType::bf16 ? 1.6e-2 : p == DType::f16 ? 2e-3 : 1e-4;
  require_close(got.sum, want.sum, 0.0, "sum");  // elementwise: the same words
  require_close(got.y, want.y, tol, "y");
  require_close(got.dx0, want.dx0, 5 * tol, "dx0");
  require_close(got.dx1, want.dx1, 5 * tol, "dx1");
  require_close(got.dw, want.dw, 1e-3, "dw");
  require_close(got.db, want.db, 1e-3, "db");
}

TEST_CASE("gpu gpt-nano: fused add + layer_norm gives the unfused plan's bits on the GPU",
          "[gpu][fusion]") {
  const DType p = GENERATE(DType::f32, DType::bf16, DType::f16);
  INFO(dtype_name(p));
  const std::size_t batch = 2, context = 128, vocab = 64;
  ModelOptions o;
  o.device = kGpu;
  o.tf32 = Tf32Mode::off;
  o.seed = 11;
  o.max_batch = batch;
  o.precision = p;
  // The linear + gelu epilogue (on by default here under bf16/fp16) rounds
  // once where the unfused pair rounds twice: not this test's fusion, and
  // not the unfused plan's bits (gpu_fused_linear_gelu_test checks it).
  o.fuse_linear_gelu = ModelOptions::LinearGelu::off;
  std::vector<float> ids(batch * context);
  std::vector<std::int32_t> labels(batch * context);
  for (std::size_t i = 0; i < ids.size(); ++i) {
    ids[i] = static_cast<float>((i * 7 + 3) % vocab);
    labels[i] = static_cast<std::int32_t>((i * 5 + 1) % vocab);
  }
  Tensor ids_gpu = to_gpu(ids), labels_gpu = to_gpu(labels);
  std::vector<std::vector<float>> grads;
  std::vector<double> losses;
  for (bool fuse : {true, false}) {
    o.fuse = fuse;
    auto m = Model::build(ModelSpec::parse("gpt-nano"), {context}, static_cast<int>(vocab), o);
    losses.push_back(
        m->forward(ids_gpu.data_as<float>(), labels_gpu.data_as<std::int32_t>(), batch, true)
            .loss_sum);
    m->backward(p == DType::f16 ? 1024.0f : 1.0f, false);
    m->synchronize();
    std::vector<float> g(m->param_count());
    Tensor::borrow(g.data(), {g.size()}, DType::f32, Device::cpu())
        .copy_from(Tensor::borrow(m->grads().ptr, {g.size()}, DType::f32, kGpu));
    grads.push_back(std::move(g));
  }
  CHECK(losses[0] == losses[1]);
  REQUIRE(grads[0].size() == grads[1].size());
  CHECK(std::memcmp(grads[0].data(), grads[1].data(), grads[0].size() * sizeof(float)) == 0);
}

TEST_CASE("gpu layer_norm weight and bias gradients: one reduction gives two bias gradients' bits",
          "[gpu]") {
  // They were two bias gradients, of an fp32 [rows, c] scratch of dy * xhat
  // and of dy; now one reduction that computes dy * xhat again from x: the
  // same values in the same order must give the same bits, accumulated or
  // not, in rows of 8 | c (16-byte loads) or not, over several slices.
  struct Shape2 {
    std::size_t rows, c;
  };
  // (37 x 40: one slice, 8 | c but not 32 | c.)
  for (const Shape2 sh : {Shape2{4099, 64}, Shape2{333, 36}, Shape2{1000, 768}, Shape2{37, 40}})
    for (const DType p : {DType::f32, DType::bf16, DType::f16})
      for (const bool accumulate : {false, true}) {
        CAPTURE(sh.rows, sh.c, dtype_name(p), accumulate);
        const auto cpu = ComputeContext::create(Device::cpu(), Tf32Mode::off, p);
        const auto gpu = ComputeContext::create(kGpu, Tf32Mode::off, p);
        const std::size_t n = sh.rows * sh.c;
        const std::vector<float> xs = on_grid(hashed_vector(31, n, -2.0f, 2.0f), p),
                                 dys = on_grid(hashed_vector(32, n, -1.0f, 1.0f), p),
                                 means = hashed_vector(33, sh.rows, -0.5f, 0.5f),
                                 rstds = hashed_vector(34, sh.rows, 0.5f, 2.0f),
                                 w = hashed_vector(35, sh.c, 0.5f, 1.5f),
                                 start = hashed_vector(36, 2 * sh.c, -1.0f, 1.0f);
        std::vector<float> terms(n);
        for (std::size_t r = 0; r < sh.rows; ++r)
          for (std::size_t j = 0; j < sh.c; ++j)
            terms[r * sh.c + j] = kernels::layer_norm_dy_xhat(xs[r * sh.c + j], dys[r * sh.c + j],
                                                              means[r], rstds[r]);
        Tensor x = stored(xs, p, kGpu, *cpu), dy = stored(dys, p, kGpu, *cpu);
        Tensor mean = floats(means, kGpu), rstd = floats(rstds, kGpu), wt = floats(w, kGpu);
        Tensor want = floats(start, kGpu), got = floats(start, kGpu), scratch = floats(terms, kGpu);
        bias_grad(*gpu, scratch.data_as<float>(), want.data_as<float>(), sh.rows, sh.c, 1,
                  accumulate);
        bias_grad(*gpu, dy.buffer(), want.data_as<float>() + sh.c, sh.rows, sh.c, 1, accumulate);
        layer_norm_backward(*gpu, x.buffer(), wt.data_as<float>(), dy.buffer(), sh.rows, sh.c,
                            mean.data_as<float>(), rstd.data_as<float>(),
                            BufferView{nullptr, 0, p, kGpu}, got.data_as<float>(),
                            got.data_as<float>() + sh.c, accumulate);
        const std::vector<float> g = widened_values(got, *gpu), w_ = widened_values(want, *gpu);
        CHECK(std::memcmp(g.data(), w_.data(), g.size() * sizeof(float)) == 0);  // bits: -0 too
      }
}

int main(int argc, char** argv) {
  if (!ringtrain::test::cuda_device_available()) return ringtrain::test::kSkippedExitCode;
  cuda_set_device(0);
  return Catch::Session().run(argc, argv);
}
