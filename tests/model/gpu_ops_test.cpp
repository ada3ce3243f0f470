// Every CUDA op against its CPU twin, on the first visible GPU: GEMM in all
// transpose combinations, activations, bias, softmax cross-entropy, dropout
// (bit-identical masks), conv2d and max-pool (cuDNN vs im2col), the pools
// bit for bit (channels-last 8 | C, the vector kernels, against the
// element-wise ones and the CPU in fp32, bf16 and fp16), and a whole model's
// forward and backward. Exits 77 (ctest: skipped) without CUDA or a
// device, so it is never reported as passed where it did not run. GPU
// contexts use --tf32 off (plain fp32), so the tolerances stay tight.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include <cstdio>

#include "ringtrain/launch/gpu_runtime.h"
#include "ringtrain/model/model.h"
#include "ringtrain/ops/activation.h"
#include "ringtrain/ops/bias.h"
#include "ringtrain/ops/conv2d.h"
#include "ringtrain/ops/dropout.h"
#include "ringtrain/ops/gemm.h"
#include "ringtrain/ops/layout_transpose.h"
#include "ringtrain/ops/merge.h"
#include "ringtrain/ops/pool2d.h"
#include "ringtrain/ops/softmax_cross_entropy.h"
#include "ringtrain/tensor/tensor.h"
#include "tests/model/grid_values.h"
#include "tests/model/test_data.h"
#include "tests/support/gpu_compare.h"
#include "tests/support/gpu_test.h"

using namespace ringtrain;
using namespace ringtrain::test;

TEST_CASE("gpu gemm matches cblas", "[gpu]") {
  Contexts c;
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      const std::size_t m = 37, n = 129, k = 65;
      const auto a = test::hashed_vector(1, m * k), b = test::hashed_vector(2, k * n);
      auto cc = test::hashed_vector(3, m * n);
      Tensor ga = to_gpu(a), gb = to_gpu(b), gc = to_gpu(cc);
      const std::size_t lda = ta ? m : k, ldb = tb ? k : n;
      gemm(*c.cpu, ta, tb, m, n, k, 0.7f, a.data(), lda, b.data(), ldb, 0.3f, cc.data(), n);
      gemm(*c.gpu, ta, tb, m, n, k, 0.7f, ga.data_as<float>(), lda, gb.data_as<float>(), ldb, 0.3f,
           gc.data_as<float>(), n);
      require_close(to_host(gc, *c.gpu), cc, 1e-4, "gemm");
    }
}

TEST_CASE("gpu activations, bias and dropout match the CPU", "[gpu]") {
  Contexts c;
  for (std::size_t n : {1, 255, 256, 257, 100003}) {
    const auto x = test::hashed_vector(n, n, -4.0f, 4.0f), dy = test::hashed_vector(n + 1, n);
    std::vector<float> y(n), dx(n);
    Tensor gx = to_gpu(x), gdy = to_gpu(dy), gy = to_gpu(y), gdx = to_gpu(dx);
    relu_forward(*c.cpu, x.data(), y.data(), n);
    relu_forward(*c.gpu, gx.data_as<float>(), gy.data_as<float>(), n);
    require_close(to_host(gy, *c.gpu), y, 0, "relu forward");
    relu_backward(*c.cpu, y.data(), dy.data(), dx.data(), n);
    relu_backward(*c.gpu, gy.data_as<float>(), gdy.data_as<float>(), gdx.data_as<float>(), n);
    require_close(to_host(gdx, *c.gpu), dx, 0, "relu backward");
    gelu_forward(*c.cpu, x.data(), y.data(), n);
    gelu_forward(*c.gpu, gx.data_as<float>(), gy.data_as<float>(), n);
    require_close(to_host(gy, *c.gpu), y, 1e-6, "gelu forward");
    gelu_backward(*c.cpu, x.data(), dy.data(), dx.data(), n);
    gelu_backward(*c.gpu, gx.data_as<float>(), gdy.data_as<float>(), gdx.data_as<float>(), n);
    require_close(to_host(gdx, *c.gpu), dx, 1e-6, "gelu backward");
    const std::uint64_t key = dropout_mask_key(3, 1, 7, 2);
    dropout_apply(*c.cpu, x.data(), y.data(), n, key, 0.3f);
    dropout_apply(*c.gpu, gx.data_as<float>(), gy.data_as<float>(), n, key, 0.3f);
    require_close(to_host(gy, *c.gpu), y, 0, "dropout (same mask)");
    // Channels-last: masked by each element's NCHW index, on both devices.
    if (n == 256) {  // 4 samples of 4 channels x 16 pixels
      dropout_apply(*c.cpu, x.data(), y.data(), n, key, 0.3f, 4, 16);
      dropout_apply(*c.gpu, gx.data_as<float>(), gy.data_as<float>(), n, key, 0.3f, 4, 16);
      require_close(to_host(gy, *c.gpu), y, 0, "channels-last dropout (same mask)");
    }
  }
  for (std::size_t inner : {1, 49}) {
    const std::size_t outer = 7, channels = 33, n = outer * channels * inner;
    auto y = test::hashed_vector(5, n);
    const auto b = test::hashed_vector(6, channels);
    Tensor gy = to_gpu(y), gb = to_gpu(b);
    bias_add(*c.cpu, y.data(), b.data(), outer, channels, inner);
    bias_add(*c.gpu, gy.data_as<float>(), gb.data_as<float>(), outer, channels, inner);
    require_close(to_host(gy, *c.gpu), y, 1e-6, "bias add");
    for (bool acc : {false, true}) {
      auto db = test::hashed_vector(7, channels);
      Tensor gdb = to_gpu(db);
      bias_grad(*c.cpu, y.data(), db.data(), outer, channels, inner, acc);
      bias_grad(*c.gpu, gy.data_as<float>(), gdb.data_as<float>(), outer, channels, inner, acc);
      require_close(to_host(gdb, *c.gpu), db, 1e-4, "bias grad");
    }
  }
}

TEST_CASE("gpu bias gradient: split reductions match the CPU and repeat bit for bit", "[gpu]") {
  Contexts c;
  // Shapes that split over row slices (kernels/bias.cuh) and ones that do not:
  // Linear (inner 1) with few and many channels, conv planes of 28x28 and 7x7.
  struct Case {
    std::size_t outer, channels, inner;
  };
  // 8192 rows of 40 channels: more slices than one chunk of the finishing
  // kernel's (64), and a second block of channels with lanes past the last.
  // 100 rows of 40: one slice, which the kernel finishes itself.
  for (const Case& k :
       {Case{1024, 512, 1}, Case{1027, 10, 1}, Case{8192, 40, 1}, Case{100, 40, 1}, Case{3, 33, 1},
        Case{0, 5, 1}, Case{64, 32, 784}, Case{129, 3, 49}, Case{2, 7, 3}}) {
    const std::size_t n = k.outer * k.channels * k.inner;
    const auto dy = test::hashed_vector(21, n);
    Tensor gdy = to_gpu(dy);
    REQUIRE((n == 0 || reinterpret_cast<std::uintptr_t>(gdy.data()) % 16 == 0));
    for (bool acc : {false, true}) {
      auto db = test::hashed_vector(22, k.channels);
      Tensor gdb = to_gpu(db), gdb2 = to_gpu(db);
      bias_grad(*c.cpu, dy.data(), db.data(), k.outer, k.channels, k.inner, acc);
      bias_grad(*c.gpu, gdy.data_as<float>(), gdb.data_as<float>(), k.outer, k.channels, k.inner,
                acc);
      bias_grad(*c.gpu, gdy.data_as<float>(), gdb2.data_as<float>(), k.outer, k.channels, k.inner,
                acc);
      INFO("outer " << k.outer << ", channels " << k.channels << ", inner " << k.inner
                    << ", accumulate " << acc);
      const auto first = to_host(gdb, *c.gpu);
      // Against a double-precision sum: a float sum of outer * inner terms
      // (50176 for the conv plane) may be off by about log2(terms) roundings
      // of the sum of |dy| on the GPU's tree, and far more on the CPU's
      // sequential loop (seen: the CPU reference was the one off by > 1e-4).
      const auto db0 = test::hashed_vector(22, k.channels);
      std::size_t wrong = 0;
      for (std::size_t ch = 0; ch < k.channels; ++ch) {
        double sum = acc ? db0[ch] : 0.0, magnitude = acc ? std::abs(db0[ch]) : 0.0;
        for (std::size_t o = 0; o < k.outer; ++o)
          for (std::size_t i = 0; i < k.inner; ++i) {
            sum += dy[(o * k.channels + ch) * k.inner + i];
            magnitude += std::abs(dy[(o * k.channels + ch) * k.inner + i]);
          }
        wrong += std::abs(first[ch] - sum) > 2e-6 * magnitude + 1e-6;
      }
      INFO("bias grad: " << wrong << " of " << k.channels
                         << " channels outside 2e-6 of the sum of |dy|");
      CHECK(wrong == 0);
      require_close(db, first, 2e-3, "CPU bias grad against the GPU's");
      CHECK(first == to_host(gdb2, *c.gpu));
      // dy one float into its buffer (not 16-byte aligned): where rows of
      // 8 | C channels took 8 channels a thread, the element-wise kernel
      // gives the same bits.
      std::vector<float> shifted(1, 0.0f);
      shifted.insert(shifted.end(), dy.begin(), dy.end());
      Tensor gdy_shifted = to_gpu(shifted);
      Tensor gdb3 = to_gpu(test::hashed_vector(22, k.channels));
      bias_grad(*c.gpu, gdy_shifted.data_as<float>() + 1, gdb3.data_as<float>(), k.outer,
                k.channels, k.inner, acc);
      CHECK(first == to_host(gdb3, *c.gpu));
    }
  }
}

TEST_CASE("gpu softmax cross-entropy matches the CPU", "[gpu]") {
  Contexts c;
  const std::size_t rows = 300, classes = 10;
  const auto z = test::hashed_vector(8, rows * classes, -5.0f, 5.0f);
  std::vector<std::int32_t> labels(rows);
  for (std::size_t i = 0; i < rows; ++i) labels[i] = static_cast<std::int32_t>((i * 3) % classes);
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
  std::vector<float> dz(rows * classes);
  softmax_cross_entropy_backward(*c.cpu, z.data(), labels.data(), rows, classes, 0.01f, dz.data());
  softmax_cross_entropy_backward(*c.gpu, gz.data_as<float>(), gl.data_as<std::int32_t>(), rows,
                                 classes, 0.01f, gdz.data_as<float>());
  require_close(to_host(gdz, *c.gpu), dz, 1e-5, "softmax ce backward");
  labels[17] = 10;
  Tensor bad = to_gpu(labels);
  CHECK_THROWS_WITH(softmax_cross_entropy_forward(
                        *c.gpu, gz.data_as<float>(), bad.data_as<std::int32_t>(), rows, classes,
                        loss.data_as<float>(), correct.data_as<std::int32_t>()),
                    Catch::Contains("label 10 of batch row 17"));
}

TEST_CASE("gpu conv2d (cuDNN) matches im2col", "[gpu]") {
  Contexts c;
  for (const Conv2dGeometry& g :
       {Conv2dGeometry{3, 13, 11, 8, 3, 1, 1}, Conv2dGeometry{4, 9, 9, 5, 3, 2, 0},
        Conv2dGeometry{6, 7, 7, 4, 1, 1, 0}}) {
    const std::size_t batch = 5;
    const std::size_t in = batch * g.in_channels * g.height * g.width;
    const std::size_t out = batch * g.out_channels * g.out_height() * g.out_width();
    const std::size_t wn = g.out_channels * g.in_channels * g.kernel * g.kernel;
    const auto x = test::hashed_vector(9, in), w = test::hashed_vector(10, wn),
               b = test::hashed_vector(11, g.out_channels), dy = test::hashed_vector(12, out);
    std::vector<float> y(out), dx(in), dw(wn), db(g.out_channels);
    Conv2dOp cpu(*c.cpu, g, batch), gpu(*c.gpu, g, batch);
    Tensor gx = to_gpu(x), gw = to_gpu(w), gb = to_gpu(b), gdy = to_gpu(dy), gy = to_gpu(y),
           gdx = to_gpu(dx), gdw = to_gpu(dw), gdb = to_gpu(db);
    cpu.forward(x.data(), w.data(), b.data(), y.data(), batch);
    gpu.forward(gx.data_as<float>(), gw.data_as<float>(), gb.data_as<float>(), gy.data_as<float>(),
                batch);
    require_close(to_host(gy, *c.gpu), y, 1e-4, "conv forward");
    cpu.backward(x.data(), w.data(), dy.data(), dx.data(), dw.data(), db.data(), batch, false);
    gpu.backward(gx.data_as<float>(), gw.data_as<float>(), gdy.data_as<float>(),
                 gdx.data_as<float>(), gdw.data_as<float>(), gdb.data_as<float>(), batch, false);
    require_close(to_host(gdx, *c.gpu), dx, 1e-4, "conv dx");
    require_close(to_host(gdw, *c.gpu), dw, 1e-4, "conv dw");
    require_close(to_host(gdb, *c.gpu), db, 1e-4, "conv db");
  }
}

TEST_CASE("gpu pools give the CPU's bits: max and average, both layouts, ties, overlap, padding",
          "[gpu]") {
  Contexts c;
  struct Case {
    std::size_t channels, height, width, kernel, stride, padding;
  };
  // (the first: the max pool the conv test checked before, 2 x 2 windows, NCHW among them)
  for (const Case& k : {Case{3, 9, 8, 2, 2, 0}, Case{5, 11, 11, 3, 2, 1}, Case{4, 7, 7, 3, 1, 1},
                        Case{6, 13, 12, 5, 3, 2}, Case{64, 14, 14, 2, 2, 0}})
    for (const PoolMode mode : {PoolMode::max, PoolMode::average})
      for (const Layout layout : {Layout::nchw, Layout::nhwc}) {
        Pool2dGeometry pg{k.channels, k.height, k.width, k.kernel, k.stride, k.padding};
        pg.mode = mode;
        pg.layout = layout;
        CAPTURE(k.channels, k.height, k.kernel, k.stride, k.padding, mode == PoolMode::max,
                layout == Layout::nhwc);
        const std::size_t batch = 3, in = batch * k.channels * k.height * k.width,
                          out = batch * k.channels * pg.out_height() * pg.out_width();
        std::vector<float> x(in);
        for (std::size_t i = 0; i < in; ++i)  // few levels: windows hold ties
          x[i] = 0.5f * static_cast<float>(static_cast<int>((i * 2654435761u) % 7) - 3);
        const auto dy = test::hashed_vector(14, out);
        std::vector<float> y(out), dx(in);
        Pool2dOp cpu(*c.cpu, pg, batch), gpu(*c.gpu, pg, batch);
        Tensor gx = to_gpu(x), gy = to_gpu(y), gdy = to_gpu(dy), gdx = to_gpu(dx);
        cpu.forward(x.data(), y.data(), batch);
        gpu.forward(gx.data_as<float>(), gy.data_as<float>(), batch);
        require_close(to_host(gy, *c.gpu), y, 0, "pool forward");
        cpu.backward(x.data(), y.data(), dy.data(), dx.data(), batch);
        gpu.backward(gx.data_as<float>(), gy.data_as<float>(), gdy.data_as<float>(),
                     gdx.data_as<float>(), batch);
        require_close(to_host(gdx, *c.gpu), dx, 0, "pool backward");
      }
}

TEST_CASE("gpu block copies between device views: narrow rows by the kernel, the CPU's bytes",
          "[gpu]") {
  // A channels-last concat's slices (kernels/pitched_copy.cuh): 16-byte
  // units where the offsets allow, smaller ones where they do not, and the
  // gaps between the destination's rows left as they were.
  auto gpu = ComputeContext::create(kGpu, Tf32Mode::off);
  auto cpu = ComputeContext::create(Device::cpu());
  struct Case {
    DType t;
    std::size_t width, dst_pitch, src_pitch, rows, dst_at, src_at;
  };
  for (const Case k :
       {Case{DType::bf16, 64, 256, 64, 157, 64, 0}, Case{DType::bf16, 96, 256, 256, 33, 0, 160},
        Case{DType::bf16, 3, 7, 5, 19, 1, 2}, Case{DType::f32, 6, 10, 6, 21, 2, 0},
        Case{DType::f32, 5, 9, 7, 4, 1, 3}}) {
    CAPTURE(dtype_name(k.t), k.width, k.dst_pitch, k.src_pitch, k.rows, k.dst_at, k.src_at);
    const std::size_t src_n = k.src_at + k.rows * k.src_pitch;
    const std::size_t dst_n = k.dst_at + k.rows * k.dst_pitch;
    const auto src = on_grid(test::hashed_vector(21, src_n), k.t);
    const auto before = on_grid(test::hashed_vector(22, dst_n), k.t);
    Tensor s_cpu = stored(src, k.t, Device::cpu(), *cpu);
    Tensor d_cpu = stored(before, k.t, Device::cpu(), *cpu);
    Tensor s_gpu = stored(src, k.t, kGpu, *cpu), d_gpu = stored(before, k.t, kGpu, *cpu);
    const auto copy = [&](const ComputeContext& ctx, Tensor& d, Tensor& s) {
      copy_blocks(ctx, d.buffer().slice(k.dst_at, dst_n - k.dst_at), k.dst_pitch,
                  s.buffer().slice(k.src_at, src_n - k.src_at), k.src_pitch, k.width, k.rows);
    };
    copy(*cpu, d_cpu, s_cpu);
    copy(*gpu, d_gpu, s_gpu);
    gpu->synchronize();
    Tensor back = Tensor::empty({dst_n}, k.t, Device::cpu());
    back.copy_from(d_gpu);
    CHECK(std::memcmp(back.data(), d_cpu.data(), dst_n * dtype_size(k.t)) == 0);
  }
}

TEST_CASE("gpu batched transpose gives the CPU's bits: tiles, few rows or columns, one line",
          "[gpu][layout]") {
  Contexts c;
  struct Case {
    std::size_t batch, rows, cols;
  };
  // One row or column (a copy: a 1x1 filter), few rows (an image's channels),
  // few columns (a 3x3 filter's taps), both few, and tiles with edges.
  for (const Case& k : {Case{3, 1, 37}, Case{2, 37, 1}, Case{4, 3, 1000}, Case{5, 64, 9},
                        Case{1, 16, 16}, Case{2, 17, 17}, Case{2, 33, 70}})
    for (const auto& [from, to] : {std::pair{DType::f32, DType::f32},
                                   {DType::f32, DType::bf16},
                                   {DType::f32, DType::f16},
                                   {DType::bf16, DType::f32},
                                   {DType::f16, DType::f16}}) {
      CAPTURE(k.batch, k.rows, k.cols, dtype_name(from), dtype_name(to));
      const std::size_t n = k.batch * k.rows * k.cols;
      // fp32 values off every 16-bit grid, so that a narrowing rounds.
      const std::vector<float> v = test::hashed_vector(21, n, -3.0f, 3.0f);
      const auto run = [&](const ComputeContext& ctx) {
        Tensor x = stored(v, from, ctx.device(), *c.cpu);
        Tensor y = Tensor::empty({n}, to, ctx.device());
        transpose_batched(ctx, x.buffer(), y.buffer(), k.batch, k.rows, k.cols);
        return widened_values(y, ctx);
      };
      const std::vector<float> want = run(*c.cpu), got = run(*c.gpu);
      CHECK(got == want);
      // Where it went: y[n, j, i] = x[n, i, j] (after x's own storage).
      const std::vector<float> xs = widened_values(stored(v, from, Device::cpu(), *c.cpu), *c.cpu);
      CHECK(got[(0 * k.cols + k.cols - 1) * k.rows + 0] ==
            kernels::round_to_precision_grid(xs[k.cols - 1], to));
    }
}

namespace {

struct PoolRun {
  std::vector<float> y, dx, dx_wide;  // dx in the storage dtype, and in fp32
};

// A stored pool's forward and backward on ctx's device, every buffer `offset`
// elements into its allocation: 0 leaves them 16-byte aligned (cudaMalloc's
// are), where channels-last 8 | C takes the GPU's vector kernels; 1 takes
// the element-wise ones. Max reads values of few levels (windows hold ties),
// average hashed ones (sums that round). dx starts as NaN: an element a
// kernel did not write shows.
PoolRun run_pool(const ComputeContext& ctx, const ComputeContext& cpu, const Pool2dGeometry& g,
                 std::size_t batch, DType p, std::size_t offset) {
  const Device dev = ctx.device();
  const std::size_t in = batch * g.channels * g.height * g.width,
                    out = batch * g.channels * g.out_height() * g.out_width();
  std::vector<float> xs(offset, 0.0f), dys(offset, 0.0f);
  const std::vector<float> hashed = on_grid(hashed_vector(15, in, -2.0f, 2.0f), p);
  for (std::size_t i = 0; i < in; ++i)
    xs.push_back(g.mode == PoolMode::max
                     ? 0.5f * static_cast<float>(static_cast<int>((i * 2654435761u) % 7) - 3)
                     : hashed[i]);
  for (float v : on_grid(hashed_vector(16, out), p)) dys.push_back(v);
  const std::vector<float> nan(offset + in, std::numeric_limits<float>::quiet_NaN());
  Tensor x = stored(xs, p, dev, cpu), dy = stored(dys, p, dev, cpu);
  Tensor y = Tensor::empty({offset + out}, p, dev);
  Tensor dx = stored(nan, p, dev, cpu), dx_wide = stored(nan, DType::f32, dev, cpu);
  const auto view = [&](Tensor& t, std::size_t n) {
    return BufferView{static_cast<char*>(t.data()) + offset * dtype_size(t.dtype()), n, t.dtype(),
                      dev};
  };
  const auto values = [&](const Tensor& t) {
    const std::vector<float> v = widened_values(t, ctx);
    return std::vector<float>(v.begin() + static_cast<std::ptrdiff_t>(offset), v.end());
  };
  Pool2dOp op(ctx, g, batch);
  op.forward(view(x, in), view(y, out), batch);
  op.backward(view(dy, out), view(dx, in), batch);
  op.backward(view(dy, out), view(dx_wide, in), batch);
  return {values(y), values(dx), values(dx_wide)};
}

// Bit for bit (a -0 is not a +0, a NaN left unwritten shows).
void require_same_bits(const std::vector<float>& got, const std::vector<float>& want,
                       const char* what) {
  REQUIRE(got.size() == want.size());
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < got.size(); ++i)
    if (std::memcmp(&got[i], &want[i], sizeof(float)) != 0) ++wrong;
  INFO(what << ": " << wrong << " of " << got.size() << " elements differ in their bits");
  CHECK(wrong == 0);
}

}  // namespace

TEST_CASE(
    "gpu pools, channels-last with 8 | C, 8 channels at a time: the element-wise kernels' "
    "and the CPU's bits",
    "[gpu]") {
  Contexts c;
  const DType p = GENERATE(DType::f32, DType::bf16, DType::f16);
  struct Case {
    std::size_t channels, height, width, kernel, stride, padding, batch;
  };
  // vgg16's 2 x 2 s2 (non-overlapping: the tiled backward; an odd side leaves
  // an input row no window covers, and padding 1 tiles partly outside the
  // input), resnet50's 3 x 3 s2 p1, inception3's 3 x 3 s2 and 3 x 3 s1 p1,
  // and a 5 x 5 s3 p2 through the kernels' run-time loops.
  const Case k = GENERATE(Case{16, 9, 8, 2, 2, 0, 3}, Case{24, 8, 10, 2, 2, 0, 2},
                          Case{16, 9, 9, 2, 2, 1, 2}, Case{16, 11, 10, 3, 2, 1, 3},
                          Case{24, 10, 9, 3, 2, 0, 2}, Case{16, 7, 9, 3, 1, 1, 3},
                          Case{24, 8, 8, 3, 1, 1, 2}, Case{24, 13, 12, 5, 3, 2, 2});
  const PoolMode mode = GENERATE(PoolMode::max, PoolMode::average);
  Pool2dGeometry g{k.channels, k.height, k.width, k.kernel, k.stride, k.padding};
  g.mode = mode;
  g.layout = Layout::nhwc;
  INFO(dtype_name(p) << " C " << k.channels << ", " << k.height << "x" << k.width << ", kernel "
                     << k.kernel << " stride " << k.stride << " padding " << k.padding
                     << (mode == PoolMode::max ? ", max" : ", average"));
  const PoolRun want = run_pool(*c.cpu, *c.cpu, g, k.batch, p, 0);
  const PoolRun vectors = run_pool(*c.gpu, *c.cpu, g, k.batch, p, 0);
  const PoolRun elements = run_pool(*c.gpu, *c.cpu, g, k.batch, p, 1);  // misaligned
  require_same_bits(vectors.y, elements.y, "y: vector against element-wise");
  require_same_bits(vectors.dx, elements.dx, "dx: vector against element-wise");
  require_same_bits(vectors.dx_wide, elements.dx_wide, "fp32 dx: vector against element-wise");
  require_same_bits(vectors.y, want.y, "y: against the CPU");
  require_same_bits(vectors.dx, want.dx, "dx: against the CPU");
  require_same_bits(vectors.dx_wide, want.dx_wide, "fp32 dx: against the CPU");
}

TEST_CASE("gpu conv2d: smaller batches get their own plan entries; results repeat bit for bit",
          "[gpu]") {
  Contexts c;
  const Conv2dGeometry g{3, 12, 12, 8, 3, 1, 1};
  const std::size_t max_batch = 9;
  const std::size_t in1 = g.in_channels * g.height * g.width,
                    out1 = g.out_channels * g.out_height() * g.out_width();
  const std::size_t wn = g.out_channels * g.in_channels * g.kernel * g.kernel;
  Conv2dOp cpu(*c.cpu, g, max_batch), gpu(*c.gpu, g, max_batch);
  const auto x = test::hashed_vector(31, max_batch * in1), w = test::hashed_vector(32, wn),
             b = test::hashed_vector(33, g.out_channels),
             dy = test::hashed_vector(34, max_batch * out1);
  Tensor gx = to_gpu(x), gw = to_gpu(w), gb = to_gpu(b), gdy = to_gpu(dy);
  for (std::size_t batch : {max_batch, std::size_t{4}, max_batch, std::size_t{1}, std::size_t{4}}) {
    INFO("batch " << batch);
    std::vector<float> y(batch * out1), dx(batch * in1);
    auto dw = test::hashed_vector(35, wn), db = test::hashed_vector(36, g.out_channels);
    Tensor gy = to_gpu(y), gdx = to_gpu(dx), gdw = to_gpu(dw), gdb = to_gpu(db);
    cpu.forward(x.data(), w.data(), b.data(), y.data(), batch);
    gpu.forward(gx.data_as<float>(), gw.data_as<float>(), gb.data_as<float>(), gy.data_as<float>(),
                batch);
    require_close(to_host(gy, *c.gpu), y, 1e-4, "conv forward");
    // Accumulating into existing gradients: the first backward at a new batch
    // size measures algorithms, which must not disturb dw.
    cpu.backward(x.data(), w.data(), dy.data(), dx.data(), dw.data(), db.data(), batch, true);
    gpu.backward(gx.data_as<float>(), gw.data_as<float>(), gdy.data_as<float>(),
                 gdx.data_as<float>(), gdw.data_as<float>(), gdb.data_as<float>(), batch, true);
    require_close(to_host(gdx, *c.gpu), dx, 1e-4, "conv dx");
    require_close(to_host(gdw, *c.gpu), dw, 1e-4, "conv dw");
    require_close(to_host(gdb, *c.gpu), db, 1e-4, "conv db");
  }
  // Deterministic algorithms only: the same backward twice gives the same bits.
  Tensor dw1 = to_gpu(std::vector<float>(wn)), dw2 = to_gpu(std::vector<float>(wn));
  Tensor db1 = to_gpu(std::vector<float>(g.out_channels)),
         dx1 = to_gpu(std::vector<float>(max_batch * in1));
  Tensor dx2 = to_gpu(std::vector<float>(max_batch * in1));
  gpu.backward(gx.data_as<float>(), gw.data_as<float>(), gdy.data_as<float>(), dx1.data_as<float>(),
               dw1.data_as<float>(), db1.data_as<float>(), max_batch, false);
  gpu.backward(gx.data_as<float>(), gw.data_as<float>(), gdy.data_as<float>(), dx2.data_as<float>(),
               dw2.data_as<float>(), db1.data_as<float>(), max_batch, false);
  CHECK(to_host(dw1, *c.gpu) == to_host(dw2, *c.gpu));
  CHECK(to_host(dx1, *c.gpu) == to_host(dx2, *c.gpu));
}

TEST_CASE("gpu --tf32 modes: default and on stay within TF32 error of the CPU", "[gpu]") {
  // TF32 keeps 10 mantissa bits: with K = 27 (conv) or 65 (GEMM) products of
  // values in [-1, 1] the error is a few 1e-3 relative to the sum's scale.
  for (Tf32Mode mode : {Tf32Mode::pytorch_default, Tf32Mode::on}) {
    INFO("tf32 " << tf32_mode_name(mode));
    auto cpu = ComputeContext::create(Device::cpu());
    auto gpu = ComputeContext::create(kGpu, mode);
    CHECK(gpu->tf32() == mode);
    const std::size_t m = 37, n = 129, k = 65;
    const auto a = test::hashed_vector(41, m * k), bm = test::hashed_vector(42, k * n);
    std::vector<float> cc(m * n);
    Tensor ga = to_gpu(a), gb = to_gpu(bm), gc = to_gpu(cc);
    gemm(*cpu, false, false, m, n, k, 1.0f, a.data(), k, bm.data(), n, 0.0f, cc.data(), n);
    gemm(*gpu, false, false, m, n, k, 1.0f, ga.data_as<float>(), k, gb.data_as<float>(), n, 0.0f,
         gc.data_as<float>(), n);
    require_close(to_host(gc, *gpu), cc, mode == Tf32Mode::on ? 3e-2 : 1e-4, "gemm");
    const Conv2dGeometry g{3, 13, 11, 8, 3, 1, 1};
    const std::size_t batch = 5, in = batch * 3 * 13 * 11, out = batch * 8 * 13 * 11,
                      wn = 8 * 3 * 9;
    const auto x = test::hashed_vector(43, in), w = test::hashed_vector(44, wn),
               b = test::hashed_vector(45, 8);
    std::vector<float> y(out);
    Conv2dOp cc_op(*cpu, g, batch), gc_op(*gpu, g, batch);
    Tensor gx = to_gpu(x), gw = to_gpu(w), gbias = to_gpu(b), gy = to_gpu(y);
    cc_op.forward(x.data(), w.data(), b.data(), y.data(), batch);
    gc_op.forward(gx.data_as<float>(), gw.data_as<float>(), gbias.data_as<float>(),
                  gy.data_as<float>(), batch);
    require_close(to_host(gy, *gpu), y, 3e-2, "conv forward (TF32 allowed)");
  }
}

TEST_CASE("gpu model forward and backward match the CPU model", "[gpu]") {
  const ModelSpec spec = ModelSpec::parse(
      "conv2d(out=8, kernel=3, padding=1); relu; max_pool2d(kernel=2); conv2d(out=8, kernel=3, "
      "stride=2); gelu; "
      "flatten; dropout(p=0.2); linear(out=32); relu; linear(out=10)");
  Contexts c;
  ModelOptions oc, og;
  oc.seed = og.seed = 5;
  oc.max_batch = og.max_batch = 16;
  og.device = kGpu;
  og.tf32 = Tf32Mode::off;
  auto mc = Model::build(spec, {1, 28, 28}, 10, oc);
  auto mg = Model::build(spec, {1, 28, 28}, 10, og);
  REQUIRE(mg->param_count() == mc->param_count());
  const std::size_t batch = 13;
  const auto x = test::hashed_vector(14, batch * 784, 0.0f, 1.0f);
  std::vector<std::int32_t> labels(batch);
  for (std::size_t i = 0; i < batch; ++i) labels[i] = static_cast<std::int32_t>(i % 10);
  Tensor gx = to_gpu(x), gl = to_gpu(labels);
  mc->set_dropout_context(2, 9);
  mg->set_dropout_context(2, 9);
  const auto rc = mc->forward(x.data(), labels.data(), batch, true);
  const auto rg = mg->forward(gx.data_as<float>(), gl.data_as<std::int32_t>(), batch, true);
  CHECK(rg.loss_sum == Approx(rc.loss_sum).epsilon(1e-4));
  mc->backward(1.0f, false);
  std::vector<std::size_t> order;
  mg->backward(1.0f, false, [&](std::size_t l) { order.push_back(l); });
  CHECK(order.size() == mg->layer_count());
  mg->synchronize();
  const BufferView gc = mc->grads();
  require_close(to_host(mg->grads().as<float>(), mg->param_count(), *c.gpu),
                std::vector<float>(gc.as<float>(), gc.as<float>() + gc.count), 1e-3,
                "model gradients");
}

namespace {

const char* kGraphSpec =
    "stem = conv2d(out=8, kernel=3, padding=1, bias=0); bn = batch_norm; a = relu; "
    "b1 = conv2d(a, out=8, kernel=3, padding=1, bias=0); b2 = batch_norm(zero_init=0); "
    "s = add(b2, a, scale=0.5); c = conv2d(a, out=4, kernel=1); cat = concat(s, c); "
    "p = avg_pool2d(kernel=3, stride=2, padding=1); q = max_pool2d(kernel=3, stride=2, "
    "padding=1); bnf = batch_norm; g = global_avg_pool; fc = linear(out=10)";

// The GPU model in `gpu_layout` against the CPU model in NCHW: loss,
// gradients, running statistics, evaluation.
void compare_graph_model(const char* text, LayoutChoice gpu_layout) {
  const ModelSpec spec = ModelSpec::parse(text);
  Contexts c;
  ModelOptions oc, og;
  oc.seed = og.seed = 7;
  oc.max_batch = og.max_batch = 16;
  oc.layout = LayoutChoice::nchw;
  og.layout = gpu_layout;
  og.device = kGpu;
  og.tf32 = Tf32Mode::off;
  auto mc = Model::build(spec, {3, 17, 15}, 10, oc);
  auto mg = Model::build(spec, {3, 17, 15}, 10, og);
  CHECK(mg->layout() == (gpu_layout == LayoutChoice::nhwc ? Layout::nhwc : Layout::nchw));
  REQUIRE(mg->param_count() == mc->param_count());
  REQUIRE(mg->buffer_count() == mc->buffer_count());
  const std::size_t batch = 11;
  const auto x = test::hashed_vector(15, batch * 3 * 17 * 15, -1.0f, 1.0f);
  std::vector<std::int32_t> labels(batch);
  for (std::size_t i = 0; i < batch; ++i) labels[i] = static_cast<std::int32_t>((i * 3) % 10);
  Tensor gx = to_gpu(x), gl = to_gpu(labels);
  const auto rc = mc->forward(x.data(), labels.data(), batch, true);
  const auto rg = mg->forward(gx.data_as<float>(), gl.data_as<std::int32_t>(), batch, true);
  CHECK(rg.loss_sum == Approx(rc.loss_sum).epsilon(1e-4));
  mc->backward(1.0f, false);
  mg->backward(1.0f, false);
  mg->synchronize();
  const BufferView gc = mc->grads();
  require_close(to_host(mg->grads().as<float>(), mg->param_count(), *c.gpu),
                std::vector<float>(gc.as<float>(), gc.as<float>() + gc.count), 1e-3,
                "graph model gradients");
  // Accumulated weight gradients (NHWC: the filter gradient is transposed
  // back and added) double them: a second forward of the same batch (a
  // backward overwrites the activations it is done with), then backward.
  // Both update their running statistics once more, alike.
  mc->forward(x.data(), labels.data(), batch, true);
  mg->forward(gx.data_as<float>(), gl.data_as<std::int32_t>(), batch, true);
  mc->backward(1.0f, true);
  mg->backward(1.0f, true);
  mg->synchronize();
  require_close(to_host(mg->grads().as<float>(), mg->param_count(), *c.gpu),
                std::vector<float>(gc.as<float>(), gc.as<float>() + gc.count), 1e-3,
                "accumulated graph model gradients");
  const BufferView bc = mc->buffers();
  require_close(to_host(mg->buffers().as<float>(), mg->buffer_count(), *c.gpu),
                std::vector<float>(bc.as<float>(), bc.as<float>() + bc.count), 1e-4,
                "running statistics");
  // Evaluation mode normalises with the running statistics on both.
  const auto ec = mc->forward(x.data(), labels.data(), batch, false);
  const auto eg = mg->forward(gx.data_as<float>(), gl.data_as<std::int32_t>(), batch, false);
  CHECK(eg.loss_sum == Approx(ec.loss_sum).epsilon(1e-4));
}

}  // namespace

TEST_CASE("gpu graph model (BatchNorm, add, concat, pools) matches the CPU model", "[gpu]") {
  compare_graph_model(kGraphSpec, LayoutChoice::nchw);
}

TEST_CASE("gpu graph model channels-last (--layout nhwc) matches the CPU model in NCHW",
          "[gpu][layout]") {
  // cuDNN NHWC convolutions with the [K, R, S, C] filter copy, NHWC pools,
  // BatchNorm over pixel rows, the channels-last concat and global average pool.
  compare_graph_model(kGraphSpec, LayoutChoice::nhwc);
  // Flatten leaves channels-last by transposing back: the linear layer sees
  // NCHW's feature order. Conv biases over NHWC pixels.
  compare_graph_model(
      "conv2d(out=6, kernel=3, stride=2, padding=1); relu; conv2d(out=5, kernel=1x3, "
      "padding=0x1); max_pool2d(kernel=2); flatten; linear(out=10)",
      LayoutChoice::nhwc);
}

int main(int argc, char** argv) {
  if (!ringtrain::test::cuda_device_available()) return ringtrain::test::kSkippedExitCode;
  cuda_set_device(0);
  return Catch::Session().run(argc, argv);
}
