// The fused BatchNorm + (add +) ReLU kernels on a GPU against the same ops on
// the CPU (ops/batch_norm_relu.h), under fp32, bf16 and fp16 storage, for an
// NCHW shape (inner H*W) and an NHWC/features one (inner 1), with and without
// the residual: y, dx, the residual's gradient (in the storage dtype and in
// fp32), dgamma and dbeta. The statistics and backward's sums are reductions
// split across threads on the GPU, so they agree within fp32 accumulation
// error plus one 16-bit rounding of each stored value, as the plain
// BatchNorm's do (gpu_stored_layers_test); the residual's gradient is dy
// masked by y and must be exact where the two y agree; without the residual,
// a backward given no y (relu's mask from y computed again) must give the
// stored y's bits. Rows of 8 | C
// channels in aligned buffers take the vector kernels, which must give the
// element-wise kernels' bits. Exits 77 (ctest:
// skipped) without CUDA or a device.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <vector>

#include "kernels/precision.cuh"
#include "ringtrain/core/dtype.h"
#include "ringtrain/launch/gpu_runtime.h"
#include "ringtrain/model/model.h"
#include "ringtrain/model/model_spec.h"
#include "ringtrain/ops/batch_norm.h"
#include "ringtrain/ops/batch_norm_relu.h"
#include "ringtrain/ops/compute_context.h"
#include "ringtrain/ops/merge.h"
#include "ringtrain/ops/precision.h"
#include "ringtrain/tensor/tensor.h"
#include "tests/model/grid_values.h"
#include "tests/model/test_data.h"
#include "tests/support/gpu_compare.h"
#include "tests/support/gpu_test.h"

using namespace ringtrain;
using namespace ringtrain::test;

namespace {

struct Run {
  // dx_beside_wide and d_residual_both: dx with the residual's gradient in
  // fp32 (a shortcut read three times), which must be dx and d_residual_wide.
  // Without the residual, dx_recomputed and the parameters' gradients
  // recomputed: the backward given no y (relu's mask from y computed again),
  // which must be dx, dgamma and dbeta.
  std::vector<float> y, dx, d_residual, d_residual_wide, dx_beside_wide, d_residual_both, dgamma,
      dbeta, dx_recomputed, grads_recomputed;
  // dy in two terms (dy_addend: the plan's paired gradients), and the same
  // backward given their sum_two_stored sum: dx, d_residual, dgamma then
  // dbeta of each, which must be the same bits (without the residual, y
  // not read, as the plan runs it).
  std::vector<float> two_terms, summed;
  // The same two terms with the second one element further into its
  // buffer than dy (not 16-byte aligned where dy is): the element kernels.
  std::vector<float> two_terms_apart;
};

// One forward (training) and backward on `ctx`'s device, every activation
// buffer `offset` elements into its allocation (1: not 16-byte aligned, which
// takes the GPU's element-wise kernels where rows of 8 | C channels take the
// vector ones).
// plain: the unfused BatchNorm (batch_norm_forward / backward), no ReLU.
Run run(const ComputeContext& ctx, const ComputeContext& cpu, DType p, const BatchNormShape& s,
        std::size_t batch, bool residual, std::size_t offset = 0, bool plain = false) {
  const Device dev = ctx.device();
  const std::size_t n = batch * s.channels * s.inner, C = s.channels;
  const auto on_grid = [&](std::uint64_t salt, float lo, float hi) {
    std::vector<float> v(offset, 0.0f);
    for (float e : hashed_vector(salt, n, lo, hi))
      v.push_back(kernels::round_to_precision_grid(e, p));
    return v;
  };
  const auto view = [&](Tensor& t) {
    return BufferView{static_cast<char*>(t.data()) + offset * dtype_size(t.dtype()), n, t.dtype(),
                      dev};
  };
  const auto values = [&](const Tensor& t) {
    std::vector<float> v = widened_values(t, ctx);
    return std::vector<float>(v.begin() + static_cast<std::ptrdiff_t>(offset), v.end());
  };
  Tensor x = stored(on_grid(1, -2.0f, 3.0f), p, dev, cpu);
  Tensor r = stored(on_grid(2, -1.0f, 1.0f), p, dev, cpu);
  Tensor dy = stored(on_grid(3, -1.0f, 1.0f), p, dev, cpu);
  Tensor y = Tensor::empty({n + offset}, p, dev), dx = Tensor::empty({n + offset}, p, dev);
  // The residual's gradients start as NaN: an element the GPU's reduction
  // did not write shows.
  const std::vector<float> nan(n + offset, std::numeric_limits<float>::quiet_NaN());
  Tensor dr = stored(nan, p, dev, cpu);
  Tensor dr_wide = stored(nan, DType::f32, dev, cpu), dr_both = stored(nan, DType::f32, dev, cpu);
  Tensor dx_both = Tensor::empty({n + offset}, p, dev);
  Tensor dx_again = Tensor::empty({n + offset}, p, dev);
  // Offset 0 is where the GPU's vector kernels may run: every buffer 16-byte
  // aligned (cudaMalloc's are).
  for (const Tensor* t : {&x, &r, &dy, &y, &dx, &dr, &dr_wide, &dr_both, &dx_both, &dx_again})
    REQUIRE((offset != 0 || reinterpret_cast<std::uintptr_t>(t->data()) % 16 == 0));
  std::vector<float> host_params = hashed_vector(4, 2 * C, 0.5f, 1.5f);
  Tensor params = Tensor::empty({2 * C}, DType::f32, dev);
  params.copy_from(Tensor::borrow(host_params.data(), {2 * C}, DType::f32, Device::cpu()));
  Tensor grads = Tensor::zeros({2 * C}, DType::f32, dev);
  std::vector<float> host_running(2 * C, 1.0f);
  Tensor running = Tensor::empty({2 * C}, DType::f32, dev);
  running.copy_from(Tensor::borrow(host_running.data(), {2 * C}, DType::f32, Device::cpu()));
  Tensor mean = Tensor::zeros({C}, DType::f32, dev), invstd = Tensor::zeros({C}, DType::f32, dev);
  Tensor sums = Tensor::zeros({2 * C + 1}, DType::f32, dev);
  const BatchNormSaved saved{mean.data_as<float>(), invstd.data_as<float>(), sums.data_as<float>()};
  const float* gamma = params.data_as<float>();
  const BufferView none{nullptr, 0, p, dev};
  if (plain) {
    float* dgamma = grads.data_as<float>();
    batch_norm_forward(ctx, s, view(x), view(y), batch, true, true, 1e-5f, 0.1f, gamma, gamma + C,
                       running.data_as<float>(), running.data_as<float>() + C, saved);
    batch_norm_backward(ctx, s, view(x), view(dy), view(dx), batch, gamma, saved, dgamma,
                        dgamma + C, false);
    Run out;
    out.y = values(y);
    out.dx = values(dx);
    const std::vector<float> g = widened_values(grads, ctx);
    out.dgamma.assign(g.begin(), g.begin() + static_cast<std::ptrdiff_t>(C));
    out.dbeta.assign(g.begin() + static_cast<std::ptrdiff_t>(C), g.end());
    return out;
  }
  batch_norm_relu_forward(ctx, s, view(x), residual ? view(r) : none, view(y), batch, true, true,
                          1e-5f, 0.1f, gamma, gamma + C, running.data_as<float>(),
                          running.data_as<float>() + C, saved);
  float* dgamma = grads.data_as<float>();
  batch_norm_relu_backward(ctx, s, view(x), view(y), view(dy), view(dx), residual ? view(dr) : none,
                           batch, gamma, gamma + C, saved, dgamma, dgamma + C, false);
  Run out;
  out.y = values(y);
  out.dx = values(dx);
  if (residual) {
    out.d_residual = values(dr);
    // The residual's gradient into an fp32 sum (a shortcut read twice).
    batch_norm_relu_backward(ctx, s, view(x), view(y), view(dy), none, view(dr_wide), batch, gamma,
                             gamma + C, saved, nullptr, nullptr, false);
    out.d_residual_wide = values(dr_wide);
    batch_norm_relu_backward(ctx, s, view(x), view(y), view(dy), view(dx_both), view(dr_both),
                             batch, gamma, gamma + C, saved, nullptr, nullptr, false);
    out.dx_beside_wide = values(dx_both);
    out.d_residual_both = values(dr_both);
  } else {
    // No y: the mask from y computed again, as the plan's backward runs it.
    Tensor again = Tensor::zeros({2 * C}, DType::f32, dev);
    float* dgamma_again = again.data_as<float>();
    batch_norm_relu_backward(ctx, s, view(x), none, view(dy), view(dx_again), none, batch, gamma,
                             gamma + C, saved, dgamma_again, dgamma_again + C, false);
    out.dx_recomputed = values(dx_again);
    out.grads_recomputed = widened_values(again, ctx);
  }
  const std::vector<float> g = widened_values(grads, ctx);
  out.dgamma.assign(g.begin(), g.begin() + static_cast<std::ptrdiff_t>(C));
  out.dbeta.assign(g.begin() + static_cast<std::ptrdiff_t>(C), g.end());
  {
    Tensor first = stored(on_grid(5, -1.0f, 1.0f), p, dev, cpu);
    Tensor second = stored(on_grid(6, -2.0f, 2.0f), p, dev, cpu);
    Tensor sum = Tensor::empty({n + offset}, p, dev);
    sum_two_stored(ctx, view(sum), view(first), view(second), 1.0f);
    const auto backward = [&](BufferView d, BufferView addend) {
      Tensor dx_t = Tensor::empty({n + offset}, p, dev);
      Tensor dr_t = stored(nan, p, dev, cpu);
      Tensor g_t = Tensor::zeros({2 * C}, DType::f32, dev);
      float* gp = g_t.data_as<float>();
      batch_norm_relu_backward(ctx, s, view(x), residual ? view(y) : none, d, view(dx_t),
                               residual ? view(dr_t) : none, batch, gamma, gamma + C, saved, gp,
                               gp + C, false, nullptr, addend);
      std::vector<float> all = values(dx_t);
      if (residual) {
        const std::vector<float> r_values = values(dr_t);
        all.insert(all.end(), r_values.begin(), r_values.end());
      }
      const std::vector<float> gs = widened_values(g_t, ctx);
      all.insert(all.end(), gs.begin(), gs.end());
      return all;
    };
    out.two_terms = backward(view(first), view(second));
    out.summed = backward(view(sum), none);
    std::vector<float> shifted = on_grid(6, -2.0f, 2.0f);
    shifted.insert(shifted.begin(), 0.0f);
    Tensor apart = stored(shifted, p, dev, cpu);
    out.two_terms_apart = backward(
        view(first),
        BufferView{static_cast<char*>(apart.data()) + (offset + 1) * dtype_size(p), n, p, dev});
  }
  return out;
}

}  // namespace

TEST_CASE("gpu fused batch_norm + (add +) relu against the CPU", "[gpu][fusion]") {
  Contexts c;
  const DType p = GENERATE(DType::f32, DType::bf16, DType::f16);
  const bool residual = GENERATE(false, true);
  // NCHW [3, 5, 7x9]; NHWC / features [3 * 63 rows, 5 channels, 1]; and
  // [8000 rows, 16 channels, 1], which the GPU takes 8 channels at a time,
  // its backward's sums over more slices than one chunk of their merge.
  const int shape = GENERATE(0, 1, 2);
  const bool nchw = shape == 0;
  const BatchNormShape s = nchw ? BatchNormShape{5, 63} : BatchNormShape{shape == 1 ? 5u : 16u, 1};
  const std::size_t batch = nchw ? 3 : shape == 1 ? 3 * 63 : 8003;
  INFO(dtype_name(p) << (residual ? " with the residual" : "") << (nchw ? " nchw" : " rows") << ", "
                     << s.channels << " channels");
  auto cpu = ComputeContext::create(Device::cpu(), Tf32Mode::off, p);
  auto gpu = ComputeContext::create(kGpu, Tf32Mode::off, p);
  const Run want = run(*cpu, *c.cpu, p, s, batch, residual);
  const Run got = run(*gpu, *c.cpu, p, s, batch, residual);
  // One rounding of the storage type, plus fp32 accumulation.
  const double tol = p == DType::bf16 ? 1.6e-2 : p == DType::f16 ? 2e-3 : 1e-4;
  require_close(got.y, want.y, tol, "y");
  require_close(got.dx, want.dx, 5 * tol, "dx");
  require_close(got.dgamma, want.dgamma, 1e-3, "dgamma");
  require_close(got.dbeta, want.dbeta, 1e-3, "dbeta");
  // dy in two terms: their stored sum's bits, on each device.
  CHECK(got.two_terms == got.summed);
  CHECK(want.two_terms == want.summed);
  CHECK(got.two_terms_apart == got.summed);
  if (residual) {
    // dy masked by y: the same word wherever the two y agree on the sign.
    std::size_t wrong = 0;
    for (std::size_t i = 0; i < got.y.size(); ++i)
      if ((got.y[i] > 0) == (want.y[i] > 0) && (got.d_residual[i] != want.d_residual[i] ||
                                                got.d_residual_wide[i] != want.d_residual_wide[i]))
        ++wrong;
    CHECK(wrong == 0);
    // dx beside an fp32 residual gradient: the same dx, the same gradient.
    CHECK(got.dx_beside_wide == got.dx);
    CHECK(got.d_residual_both == got.d_residual_wide);
  } else {
    // y computed again gives the stored y's mask: the same bits, on both.
    for (const Run* r : {&got, &want}) {
      std::vector<float> grads = r->dgamma;
      grads.insert(grads.end(), r->dbeta.begin(), r->dbeta.end());
      CHECK(r->dx_recomputed == r->dx);
      CHECK(r->grads_recomputed == grads);
    }
  }
}

TEST_CASE(
    "gpu fused batch_norm + (add +) relu: 8 channels at a time give the element-wise "
    "kernels' bits",
    "[gpu][fusion]") {
  Contexts c;
  const DType p = GENERATE(DType::f32, DType::bf16, DType::f16);
  // 0: fused with ReLU, 1: and the add, 2: the plain BatchNorm's kernels.
  const int variant = GENERATE(0, 1, 2);
  const bool residual = variant == 1, plain = variant == 2;
  INFO(dtype_name(p) << (residual ? " with the residual" : "") << (plain ? " plain" : ""));
  auto gpu = ComputeContext::create(kGpu, Tf32Mode::off, p);
  const BatchNormShape s{16, 1};
  const Run vectors = run(*gpu, *c.cpu, p, s, 8003, residual, 0, plain);
  const Run elements = run(*gpu, *c.cpu, p, s, 8003, residual, 1, plain);  // misaligned
  CHECK(vectors.y == elements.y);
  CHECK(vectors.dx == elements.dx);
  CHECK(vectors.d_residual == elements.d_residual);
  CHECK(vectors.d_residual_wide == elements.d_residual_wide);
  CHECK(vectors.dx_beside_wide == elements.dx_beside_wide);
  CHECK(vectors.d_residual_both == elements.d_residual_both);
  CHECK(vectors.dgamma == elements.dgamma);
  CHECK(vectors.dbeta == elements.dbeta);
  CHECK(vectors.dx_recomputed == elements.dx_recomputed);
  CHECK(vectors.grads_recomputed == elements.grads_recomputed);
  CHECK(vectors.two_terms == elements.two_terms);
  CHECK(vectors.two_terms == vectors.summed);
}

TEST_CASE("gpu ResNet blocks: outputs' gradients read in two terms, the summing pass's bits",
          "[gpu][fusion]") {
  // Every block output of a ResNet on a GPU has its gradient in two terms
  // (the next convolution's 16-bit dx and the next fused add's masked dy),
  // which the fused BatchNorm + (add +) ReLU reads as two where
  // RINGTRAIN_FUSED_DY_TERMS=off keeps the pass that sums them first: the
  // same model, two steps (the second accumulated), the same bits.
  const char* graph = R"(input(16, 8, 8)
stem = conv2d(out=16, kernel=3, padding=1, bias=0)
bn0 = batch_norm
r0 = relu
c1 = conv2d(out=16, kernel=3, padding=1, bias=0)
bn1 = batch_norm
s1 = add(bn1, r0)
r1 = relu
c2 = conv2d(out=16, kernel=3, padding=1, bias=0)
bn2 = batch_norm
s2 = add(bn2, r1)
r2 = relu
g = global_avg_pool
fc = linear(out=5)
)";
  const DType p = GENERATE(DType::bf16, DType::f16);
  const auto layout = GENERATE(LayoutChoice::nchw, LayoutChoice::nhwc);
  INFO(dtype_name(p) << (layout == LayoutChoice::nhwc ? " nhwc" : " nchw"));
  constexpr std::size_t kBatch = 4;
  const std::vector<float> x1 = hashed_vector(51, kBatch * 16 * 64, -2.0f, 2.0f);
  const std::vector<float> x2 = hashed_vector(52, kBatch * 16 * 64, -2.0f, 2.0f);
  const std::vector<std::int32_t> labels{1, 4, 0, 2};
  const auto to_gpu = [](const void* data, std::size_t n, DType t) {
    Tensor g = Tensor::empty({n}, t, kGpu);
    g.copy_from(Tensor::borrow(const_cast<void*>(data), {n}, t, Device::cpu()));
    return g;
  };
  Tensor gx1 = to_gpu(x1.data(), x1.size(), DType::f32),
         gx2 = to_gpu(x2.data(), x2.size(), DType::f32);
  Tensor gl = to_gpu(labels.data(), labels.size(), DType::i32);
  const float scale = p == DType::f16 ? 1024.0f : 1.0f;
  auto gpu = ComputeContext::create(kGpu, Tf32Mode::off, p);  // to read the results back
  const auto train = [&](bool two_terms) {
    if (two_terms)
      ::unsetenv("RINGTRAIN_FUSED_DY_TERMS");
    else
      ::setenv("RINGTRAIN_FUSED_DY_TERMS", "off", 1);
    ModelOptions o;
    o.device = kGpu;
    o.seed = 3;
    o.max_batch = kBatch;
    o.precision = p;
    o.layout = layout;
    o.fuse = true;
    o.tf32 = Tf32Mode::off;
    auto m = Model::build(ModelSpec::parse(graph), {16, 8, 8}, 5, o);
    ::unsetenv("RINGTRAIN_FUSED_DY_TERMS");
    for (const std::size_t i : {std::size_t{2}, std::size_t{6}}) {  // r0, r1
      INFO(m->layer_name(i) << ": " << m->layer_kernels(i));
      CHECK(m->layer_kernels(i).find(two_terms ? "summed as its fused backward reads them"
                                               : "summed in one pass") != std::string::npos);
    }
    m->forward(gx1.data_as<float>(), gl.data_as<std::int32_t>(), kBatch, true);
    m->backward(scale, false);
    m->forward(gx2.data_as<float>(), gl.data_as<std::int32_t>(), kBatch, true);
    m->backward(scale, true);
    m->synchronize();
    std::vector<float> v = to_host(m->grads().as<float>(), m->param_count(), *gpu);
    const std::vector<float> b = to_host(m->buffers().as<float>(), m->buffer_count(), *gpu);
    v.insert(v.end(), b.begin(), b.end());
    return v;
  };
  const std::vector<float> two = train(true), summed = train(false);
  REQUIRE(two.size() == summed.size());
  CHECK(std::memcmp(two.data(), summed.data(), two.size() * sizeof(float)) == 0);
}

int main(int argc, char** argv) {
  if (!ringtrain::test::cuda_device_available()) return ringtrain::test::kSkippedExitCode;
  cuda_set_device(0);
  return Catch::Session().run(argc, argv);
}
