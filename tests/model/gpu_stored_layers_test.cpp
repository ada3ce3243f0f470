// The stored layers on a GPU against the same layers on the CPU, under bf16
// and fp16, in both layouts: 16-bit x in, 16-bit y and dx out (and an fp32
// dx, where the model sums several gradients), parameter gradients in fp32.
// The elementwise layers, the pools, global_avg_pool, dropout and concat
// compute each output in the same order on both devices and must give the
// same words; BatchNorm and layer_norm (reductions split across threads), a convolution
// (cuDNN against the CPU's fp32 convolution of the same 16-bit values) and a
// linear layer (cuBLASLt with its bias epilogues, likewise) agree within one 16-bit rounding plus
// fp32 accumulation error. Exits 77 (ctest: skipped) without CUDA or a device.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "kernels/precision.cuh"
#include "model/layer.h"
#include "model/tied_lm_head_layer.h"
#include "ringtrain/launch/gpu_runtime.h"
#include "ringtrain/model/model_spec.h"
#include "ringtrain/ops/compute_context.h"
#include "ringtrain/ops/merge.h"
#include "ringtrain/ops/precision.h"
#include "ringtrain/ops/softmax_cross_entropy.h"
#include "ringtrain/tensor/tensor.h"
#include "tests/model/grid_values.h"
#include "tests/model/test_data.h"
#include "tests/support/gpu_compare.h"
#include "tests/support/gpu_test.h"

using namespace ringtrain;
using namespace ringtrain::test;

namespace {

using Words = std::vector<std::uint16_t>;

Words words_of(const std::vector<float>& v, DType p) {
  Words w(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) w[i] = kernels::to_precision_bits(v[i], p);
  return w;
}
std::vector<float> floats_of(const Words& w, DType p) {
  std::vector<float> v(w.size());
  for (std::size_t i = 0; i < w.size(); ++i) v[i] = kernels::from_precision_bits(w[i], p);
  return v;
}
Tensor words_to_gpu(const Words& w, DType p) {
  Tensor t = Tensor::empty({w.size()}, p, kGpu);
  t.copy_from(Tensor::borrow(const_cast<std::uint16_t*>(w.data()), {w.size()}, p, Device::cpu()));
  return t;
}
Words words_to_host(const Tensor& t, const ComputeContext& ctx) {
  ctx.synchronize();
  Words w(t.numel());
  Tensor::borrow(w.data(), {w.size()}, t.dtype(), Device::cpu()).copy_from(t);
  return w;
}

// A layer with its parameters (on the grid) and buffers on the context's device.
struct Node {
  std::unique_ptr<Layer> layer;
  StoresActivations* stores = nullptr;
  Tensor params, grads, buffers;
};
Node node(const std::string& graph, const std::vector<Shape>& inputs, const ComputeContext& ctx,
          DType p, Layout layout) {
  static const DropoutContext dropout{};
  const ModelSpec spec = ModelSpec::parse(graph);
  Node n;
  n.layer = make_layer(spec.layers.back(), inputs, "l", 0, ctx, 4, dropout, layout);
  n.stores = dynamic_cast<StoresActivations*>(n.layer.get());
  std::size_t np = 0;
  for (const ParamDesc& d : n.layer->param_descs()) np += d.shape.numel();
  std::vector<float> params = on_grid(21, std::max<std::size_t>(np, 1), p);
  std::vector<float> zeros(params.size(), 0.0f), buffers;
  for (const ParamDesc& d : n.layer->buffer_descs())
    buffers.insert(buffers.end(), d.shape.numel(), d.constant);
  const Device dev = ctx.device();
  const auto place = [&](std::vector<float>& v) {
    Tensor t = Tensor::empty({std::max<std::size_t>(v.size(), 1)}, DType::f32, dev);
    if (!v.empty()) t.copy_from(Tensor::borrow(v.data(), {v.size()}, DType::f32, Device::cpu()));
    return t;
  };
  n.params = place(params);
  n.grads = place(zeros);
  n.layer->bind(n.params.data_as<float>(), n.grads.data_as<float>());
  if (!buffers.empty()) {
    n.buffers = place(buffers);
    n.layer->bind_buffers(n.buffers.data_as<float>());
  }
  return n;
}

struct Result {
  std::vector<float> y, dx16, dx32, grads;
};

// One stored forward and backward of `n` on its device: dx in 16 bits, and
// again in fp32.
Result run(Node& n, const ComputeContext& ctx, const std::vector<Shape>& inputs, DType p) {
  const std::size_t batch = 3;
  const Device dev = ctx.device();
  const bool gpu = dev.is_cuda();
  std::vector<Words> x16;
  std::vector<Tensor> keep;
  std::vector<BufferView> xs, dx16, dx32;
  for (std::size_t k = 0; k < inputs.size(); ++k)
    x16.push_back(words_of(on_grid(30 + k, batch * inputs[k].numel(), p), p));
  const std::size_t out = batch * n.layer->output_shape().numel();
  Words dy16 = words_of(on_grid(40, out, p), p), y16(out);
  const auto view16 = [&](Words& w) -> BufferView {
    if (!gpu) return {w.data(), w.size(), p, dev};
    keep.push_back(words_to_gpu(w, p));
    return keep.back().buffer();
  };
  std::vector<Words> dxw(inputs.size());
  std::vector<std::vector<float>> dxf(inputs.size());
  for (std::size_t k = 0; k < inputs.size(); ++k) {
    xs.push_back(view16(x16[k]));
    dxw[k].assign(x16[k].size(), 0);
    dxf[k].assign(x16[k].size(), 0.0f);
    dx16.push_back(view16(dxw[k]));
    if (gpu) {
      keep.push_back(to_gpu(dxf[k]));
      dx32.push_back(keep.back().buffer());
    } else {
      dx32.push_back(view_of(dxf[k].data(), dxf[k].size()));
    }
  }
  const BufferView y = view16(y16), dy = view16(dy16);
  n.stores->forward_stored(xs, y, batch, true);
  n.stores->backward_stored(xs, y, dy, dx16, batch, false);
  Result r;
  r.grads = to_host(n.grads, ctx);
  n.stores->backward_stored(xs, y, dy, dx32, batch, false);
  ctx.synchronize();
  const auto host16 = [&](const BufferView& v, Words& w) {
    if (gpu) w = words_to_host(Tensor::borrow(v, {v.count}), ctx);
    return floats_of(w, p);
  };
  r.y = host16(y, y16);
  for (std::size_t k = 0; k < inputs.size(); ++k) {
    const std::vector<float> d16 = host16(dx16[k], dxw[k]);
    r.dx16.insert(r.dx16.end(), d16.begin(), d16.end());
    const std::vector<float> d32 =
        gpu ? to_host(Tensor::borrow(dx32[k], {dx32[k].count}), ctx) : dxf[k];
    r.dx32.insert(r.dx32.end(), d32.begin(), d32.end());
  }
  return r;
}

// The layer on the GPU against its stored form on the CPU (or, for a layer
// the CPU runs through the adapter, its fp32 form narrowed), within `tol`
// (0: the same words).
void compare(const std::string& graph, const std::vector<Shape>& inputs, double tol,
             Layout layout = Layout::nchw) {
  for (const DType p : {DType::bf16, DType::f16}) {
    INFO(graph << " " << dtype_name(p) << (layout == Layout::nhwc ? " nhwc" : " nchw"));
    const auto cpu = ComputeContext::create(Device::cpu(), Tf32Mode::off, p);
    const auto gpu = ComputeContext::create(kGpu, Tf32Mode::off, p);
    Node g = node(graph, inputs, *gpu, p, layout);
    REQUIRE(g.stores != nullptr);
    REQUIRE(g.stores->stores_activations());
    Node c = node(graph, inputs, *cpu, p, layout);
    const Result rg = run(g, *gpu, inputs, p);
    // Under RINGTRAIN_CONV_WGRAD=gemm (the gpu_stored_layers_gemm_wgrad
    // run), a channels-last convolution's weight gradient must have run on
    // ringtrain's GEMMs, not passed on the same numbers by another path.
    const char* wgrad = std::getenv("RINGTRAIN_CONV_WGRAD");
    if (wgrad != nullptr && std::string_view(wgrad) == "gemm" && layout == Layout::nhwc &&
        graph.starts_with("conv2d")) {
      const auto* kernels = dynamic_cast<const DescribesKernels*>(g.layer.get());
      REQUIRE(kernels != nullptr);
      INFO("kernels: " << kernels->describe_kernels());
      CHECK(kernels->describe_kernels().find("bwd-filter=cublasLt-") != std::string::npos);
    }
    Result rc;
    if (c.stores != nullptr && c.stores->stores_activations()) {
      rc = run(c, *cpu, inputs, p);
    } else {  // the CPU's fp32 form on the same values, narrowed
      REQUIRE(inputs.size() == 1);
      const std::size_t batch = 3;
      const auto x = on_grid(30, batch * inputs[0].numel(), p);
      const auto dy = on_grid(40, batch * c.layer->output_shape().numel(), p);
      rc.y.assign(dy.size(), 0.0f);
      rc.dx32.assign(x.size(), 0.0f);
      c.layer->forward(x.data(), rc.y.data(), batch, true);
      for (float& e : rc.y) e = kernels::round_to_precision_grid(e, p);
      c.layer->backward(x.data(), rc.y.data(), dy.data(), rc.dx32.data(), batch, false);
      rc.grads = to_host(c.grads, *cpu);
      rc.dx16 = rc.dx32;
      for (float& e : rc.dx16) e = kernels::round_to_precision_grid(e, p);
    }
    require_close(rg.y, rc.y, tol, "y");
    require_close(rg.dx16, rc.dx16, tol, "dx (16-bit)");
    require_close(rg.dx32, rc.dx32, tol, "dx (fp32)");
    require_close(rg.grads, rc.grads, tol == 0 ? 1e-5 : tol, "parameter gradients");
  }
}

}  // namespace

TEST_CASE(
    "gpu stored elementwise layers, pools, global_avg_pool, dropout and concat give the "
    "CPU's words",
    "[gpu]") {
  for (const Layout layout : {Layout::nchw, Layout::nhwc}) {
    compare("relu", {Shape{3, 5, 7}}, 0, layout);
    compare("a = relu; b = relu; y = add(a, b, scale=0.3)", {Shape{4, 3, 3}, Shape{4, 3, 3}}, 0,
            layout);
    compare("max_pool2d(kernel=3, stride=2, padding=1)", {Shape{3, 9, 8}}, 0, layout);
    compare("avg_pool2d(kernel=3, stride=2, padding=1)", {Shape{3, 9, 8}}, 0, layout);
    compare("global_avg_pool", {Shape{6, 4, 5}}, 0, layout);
    compare("global_avg_pool", {Shape{16, 3, 5}}, 0, layout);  // 8 | C: 8 channels a thread
    compare("dropout(p=0.3)", {Shape{3, 4, 5}}, 0, layout);
    if (layout == Layout::nhwc) compare("flatten", {Shape{3, 4, 5}}, 0, layout);
    if (layout == Layout::nchw) compare("position_embedding(context=6)", {Shape{4, 5}}, 0);
    compare("a = relu; b = relu; y = concat(a, b)", {Shape{2, 3, 4}, Shape{3, 3, 4}}, 0, layout);
  }
}

TEST_CASE("gpu add_widened: a 16-bit contribution into an fp32 sum gives the CPU's bits", "[gpu]") {
  // 100000: 8 at a time (16-byte accesses); 100003: one at a time.
  for (const std::size_t n : {100003u, 100000u})
    for (const DType p : {DType::bf16, DType::f16}) {
      CAPTURE(dtype_name(p), n);
      const auto cpu = ComputeContext::create(Device::cpu(), Tf32Mode::off, p);
      const auto gpu = ComputeContext::create(kGpu, Tf32Mode::off, p);
      const std::vector<float> x = on_grid(51, n, p);
      std::vector<float> sum = test::hashed_vector(52, n, -3.0f, 3.0f);
      Tensor gsum = to_gpu(sum);
      const Tensor gx = words_on(x, p, kGpu);
      add_widened(*gpu, gsum.buffer(), gx.buffer());
      Tensor cx = words_on(x, p, Device::cpu());
      add_widened(*cpu, view_of(sum.data(), n), cx.buffer());
      CHECK(to_host(gsum, *gpu) == sum);
    }
}

TEST_CASE("gpu narrow_sum gives the CPU's bits: 1 to 4 terms, 8 at a time and one at a time",
          "[gpu]") {
  for (const DType p : {DType::bf16, DType::f16}) {
    const auto cpu = ComputeContext::create(Device::cpu(), Tf32Mode::off, p);
    const auto gpu = ComputeContext::create(kGpu, Tf32Mode::off, p);
    // 100000 (8 | n, aligned: the vector kernel), 100003, and 99999 values
    // one element into their buffers (both: the element-wise kernel).
    for (const std::size_t n : {std::size_t{100000}, std::size_t{100003}, std::size_t{99999}})
      for (const DType term_type : {p, DType::f32})
        for (std::size_t count = 1; count <= kNarrowSumMaxTerms; ++count) {
          const std::size_t at = n == 99999 ? 1 : 0;
          CAPTURE(dtype_name(p), dtype_name(term_type), n, count);
          const std::vector<float> sum = test::hashed_vector(70, n + at, -3000.0f, 3000.0f);
          const Tensor gsum = to_gpu(sum);
          std::vector<Tensor> cpu_terms, gpu_terms;
          std::vector<BufferView> cv, gv;
          for (std::size_t k = 0; k < count; ++k) {
            const std::vector<float> t = on_grid(71 + k, n + at, p);
            cpu_terms.push_back(stored(t, term_type, Device::cpu(), *cpu));
            gpu_terms.push_back(stored(t, term_type, kGpu, *cpu));
            cv.push_back(cpu_terms.back().buffer().slice(at, n));
            gv.push_back(gpu_terms.back().buffer().slice(at, n));
          }
          Tensor cy = Tensor::empty({n + at}, p, Device::cpu());
          Tensor gy = Tensor::empty({n + at}, p, kGpu);
          std::vector<float> csum = sum;
          narrow_sum(*cpu, cy.buffer().slice(at, n), view_of(csum.data() + at, n), cv);
          narrow_sum(*gpu, gy.buffer().slice(at, n), gsum.buffer().slice(at, n), gv);
          const std::vector<float> got = widened_values(gy, *gpu);
          const std::vector<float> expect = widened_values(cy, *cpu);
          CHECK(std::vector<float>(got.begin() + at, got.end()) ==
                std::vector<float>(expect.begin() + at, expect.end()));
          CHECK(to_host(gsum, *gpu) == sum);  // read, not written
        }
  }
}

TEST_CASE("gpu sum_two_stored gives the CPU's bits: 8 at a time, one at a time, in place",
          "[gpu]") {
  for (const DType p : {DType::bf16, DType::f16}) {
    CAPTURE(dtype_name(p));
    const auto cpu = ComputeContext::create(Device::cpu(), Tf32Mode::off, p);
    const auto gpu = ComputeContext::create(kGpu, Tf32Mode::off, p);
    // 100000 (8 | n, aligned: the vector kernel), 100003, and 99999 values
    // one element into their buffers (both: the element-wise kernel).
    for (const std::size_t n : {std::size_t{100000}, std::size_t{100003}, std::size_t{99999}}) {
      const std::size_t at = n == 99999 ? 1 : 0;
      CAPTURE(n);
      const std::vector<float> x0 = on_grid(55, n + at, p), x1 = on_grid(56, n + at, p);
      std::vector<float> want(n + at);
      Tensor c0 = words_on(x0, p, Device::cpu()), c1 = words_on(x1, p, Device::cpu());
      Tensor cy = Tensor::empty({n + at}, p, Device::cpu());
      sum_two_stored(*cpu, cy.buffer().slice(at, n), c0.buffer().slice(at, n),
                     c1.buffer().slice(at, n), 0.75f);
      Tensor g0 = words_on(x0, p, kGpu), g1 = words_on(x1, p, kGpu);
      Tensor gy = Tensor::empty({n + at}, p, kGpu);
      sum_two_stored(*gpu, gy.buffer().slice(at, n), g0.buffer().slice(at, n),
                     g1.buffer().slice(at, n), 0.75f);
      std::vector<float> got = widened_values(gy, *gpu), expect = widened_values(cy, *cpu);
      CHECK(std::vector<float>(got.begin() + at, got.end()) ==
            std::vector<float>(expect.begin() + at, expect.end()));
      // In place (y is x0), as a paired gradient sums.
      sum_two_stored(*gpu, g0.buffer().slice(at, n), g0.buffer().slice(at, n),
                     g1.buffer().slice(at, n), 0.75f);
      got = widened_values(g0, *gpu);
      CHECK(std::vector<float>(got.begin() + at, got.end()) ==
            std::vector<float>(expect.begin() + at, expect.end()));
    }
  }
}

TEST_CASE("gpu convert_storage narrows a summed gradient to the CPU's bits", "[gpu]") {
  for (const DType p : {DType::bf16, DType::f16}) {
    CAPTURE(dtype_name(p));
    const auto cpu = ComputeContext::create(Device::cpu(), Tf32Mode::off, p);
    const auto gpu = ComputeContext::create(kGpu, Tf32Mode::off, p);
    for (const std::size_t n : {std::size_t{100003}, std::size_t{5}}) {
      std::vector<float> sum = test::hashed_vector(53, n, -70000.0f, 70000.0f);
      Tensor gsum = to_gpu(sum);
      Tensor g16 = Tensor::empty({n}, p, kGpu), c16 = Tensor::empty({n}, p, Device::cpu());
      convert_storage(*gpu, g16.buffer(), gsum.buffer());
      convert_storage(*cpu, c16.buffer(), view_of(sum.data(), n));
      CHECK(to_host(gsum, *gpu) == sum);  // the sum is read, not rounded in place
      CHECK(widened_values(g16, *gpu) == widened_values(c16, *cpu));
    }
    // An odd offset: the scalar path of the kernel.
    const std::size_t n = 37;
    std::vector<float> sum = test::hashed_vector(54, n + 1, -3.0f, 3.0f);
    Tensor gsum = to_gpu(sum);
    Tensor g16 = Tensor::empty({n + 1}, p, kGpu);
    convert_storage(*gpu, g16.buffer().slice(1, n), gsum.buffer().slice(1, n));
    std::vector<float> want(sum.begin() + 1, sum.end());
    round_to_precision(*cpu, want.data(), want.data(), n, p);
    const std::vector<float> got = widened_values(g16, *gpu);
    CHECK(std::vector<float>(got.begin() + 1, got.end()) == want);
  }
}

TEST_CASE(
    "gpu stored norms, convolution and linear agree with the CPU within one 16-bit "
    "rounding",
    "[gpu]") {
  compare("linear(out=7)", {Shape{12}}, 2e-2);
  compare("layer_norm", {Shape{3, 40}}, 1e-2);
  compare("linear(out=6)", {Shape{3, 10}}, 2e-2);
  for (const Layout layout : {Layout::nchw, Layout::nhwc}) {
    compare("batch_norm", {Shape{5, 6, 7}}, 1e-2, layout);
    // 8 input channels: cuDNN's deterministic 16-bit NHWC algorithms want
    // C a multiple of 8 (with 4 the layer may rightly fall back to fp32).
    compare("conv2d(out=8, kernel=3, padding=1, bias=0)", {Shape{8, 9, 9}}, 2e-2, layout);
    compare("conv2d(out=8, kernel=3, stride=2, padding=1)", {Shape{8, 9, 9}}, 2e-2, layout);
    // A pointwise one: under RINGTRAIN_CONV_WGRAD=gemm its NHWC weight
    // gradient is one GEMM over x and dy in place.
    compare("conv2d(out=8, kernel=1, bias=0)", {Shape{8, 9, 9}}, 2e-2, layout);
    // A ResNet stem on 3 channels (which cuDNN's 16-bit NHWC engines may not
    // take: the fp32 fallback, or under RINGTRAIN_CONV_WGRAD=gemm the
    // unfolded input's GEMM for its weight gradient).
    compare("conv2d(out=8, kernel=7, stride=2, padding=3, bias=0)", {Shape{3, 15, 15}}, 2e-2,
            layout);
    // VGG's first convolution on 3 channels, at stride 1 (under
    // RINGTRAIN_CONV_WGRAD=gemm the unfolded input's GEMM too: the shifted
    // rows would be 6 bytes apart).
    compare("conv2d(out=8, kernel=3, padding=1)", {Shape{3, 9, 9}}, 2e-2, layout);
  }
}

TEST_CASE(
    "gpu stored tied LM head (16-bit E) agrees with the CPU's head within one 16-bit rounding",
    "[gpu]") {
  // The logits and their gradient in rows of the padded vocabulary (the
  // model's last node under bf16/fp16), and unpadded (a head that is not).
  const std::size_t batch = 2, t = 7, c = 6, vocab = 11, rows = batch * t;
  const std::size_t vp = TiedLmHeadLayer::padded_vocab(vocab);
  REQUIRE(vp == 64);  // 16-byte aligned 16-bit rows
  for (const std::size_t ld : {vp, vocab}) {
    for (const DType p : {DType::bf16, DType::f16}) {
      INFO(dtype_name(p) << ", rows " << ld << " apart");
      const auto cpu = ComputeContext::create(Device::cpu(), Tf32Mode::off, p);
      const auto gpu = ComputeContext::create(kGpu, Tf32Mode::off, p);
      TiedLmHeadLayer wide("head", Shape{t, c}, "wte", vocab, *cpu);
      TiedLmHeadLayer typed("head", Shape{t, c}, "wte", vocab, *gpu);
      REQUIRE(typed.stores_activations());
      REQUIRE(typed.padded_row_stride(p) == vp);
      typed.set_output_row_stride(ld);
      std::vector<float> e = test::hashed_vector(70, vocab * c);  // fp32, off the grid
      std::vector<float> de(e.size(), 0.25f);
      // The GPU multiplies by its 16-bit copy of E (tensor cores, as
      // autocast): the CPU's fp32 head gets that copy's values.
      std::vector<float> e_grid = e;
      for (float& v : e_grid) v = kernels::round_to_precision_grid(v, p);
      wide.bind(e_grid.data(), de.data());
      Tensor ge = to_gpu(e), gde = to_gpu(de);
      typed.bind(ge.data_as<float>(), gde.data_as<float>());
      const auto x = on_grid(71, rows * c, p), dy = on_grid(72, rows * vocab, p);
      std::vector<float> y(rows * vocab), dx(rows * c);
      wide.forward(x.data(), y.data(), batch, true);
      wide.backward(x.data(), y.data(), dy.data(), dx.data(), batch, true);
      // dy in rows ld apart, its padding 0 (as the loss writes it).
      std::vector<float> dy_rows(rows * ld, 0.0f);
      for (std::size_t r = 0; r < rows; ++r)
        for (std::size_t j = 0; j < vocab; ++j) dy_rows[r * ld + j] = dy[r * vocab + j];
      const Tensor gx = words_to_gpu(words_of(x, p), p);
      const Tensor gdy = words_to_gpu(words_of(dy_rows, p), p);
      Tensor gy = Tensor::empty({rows * ld}, p, kGpu);
      Tensor gdx16 = Tensor::empty({rows * c}, p, kGpu),
             gdx32 = Tensor::empty({rows * c}, DType::f32, kGpu);
      const std::vector<BufferView> xs{gx.buffer()};
      typed.forward_stored(xs, gy.buffer(), batch, true);
      typed.backward_stored(xs, gy.buffer(), gdy.buffer(), {gdx16.buffer()}, batch, true);
      const std::vector<float> y16 = floats_of(words_to_host(gy, *gpu), p);
      const std::vector<float> dx16 = floats_of(words_to_host(gdx16, *gpu), p);
      for (std::size_t r = 0; r < rows; ++r) {
        for (std::size_t j = 0; j < vocab; ++j)
          CHECK(y16[r * ld + j] == Approx(y[r * vocab + j]).epsilon(1e-2).margin(1e-4));
        for (std::size_t j = vocab; j < ld; ++j) CHECK(y16[r * ld + j] == 0.0f);  // E16's zero rows
      }
      for (std::size_t i = 0; i < dx.size(); ++i)
        CHECK(dx16[i] == Approx(dx[i]).epsilon(1e-2).margin(1e-4));
      // dE accumulated onto 0.25 twice on the GPU (two backwards), once on the CPU.
      typed.backward_stored(xs, gy.buffer(), gdy.buffer(), {gdx32.buffer()}, batch, true);
      const std::vector<float> dx32 = to_host(gdx32, *gpu), gde_host = to_host(gde, *gpu);
      for (std::size_t i = 0; i < dx.size(); ++i)
        CHECK(dx32[i] == Approx(dx[i]).epsilon(1e-4).margin(1e-6));
      for (std::size_t i = 0; i < de.size(); ++i)
        CHECK(gde_host[i] - 0.25f == Approx(2.0f * (de[i] - 0.25f)).epsilon(1e-4).margin(1e-5));
    }
  }
}

TEST_CASE("gpu loss on 16-bit logits agrees with the CPU's within one 16-bit rounding", "[gpu]") {
  // The narrow kernel (a thread per row) and the wide one (a block per row).
  for (const std::size_t classes : {std::size_t{7}, std::size_t{600}}) {
    for (const DType p : {DType::bf16, DType::f16}) {
      INFO(classes << " classes, " << dtype_name(p));
      const std::size_t rows = 6;
      const auto cpu = ComputeContext::create(Device::cpu(), Tf32Mode::pytorch_default, p);
      const auto gpu = ComputeContext::create(kGpu, Tf32Mode::pytorch_default, p);
      std::vector<std::int32_t> labels(rows);
      for (std::size_t r = 0; r < rows; ++r)
        labels[r] = static_cast<std::int32_t>((r * 5 + 1) % classes);
      labels[2] = -100;
      const Words z = words_of(on_grid(60, rows * classes, p), p);
      const Tensor gz = words_to_gpu(z, p), gl = to_gpu(labels);
      const BufferView zc{const_cast<std::uint16_t*>(z.data()), z.size(), p, Device::cpu()};
      const BufferView zg{gz.data(), z.size(), p, kGpu};
      Tensor row_loss = Tensor::empty({rows}, DType::f32, kGpu);
      Tensor row_correct = Tensor::empty({rows}, DType::i32, kGpu);
      const auto rc =
          softmax_cross_entropy_forward(*cpu, zc, labels.data(), rows, classes, nullptr, nullptr);
      const auto rg = softmax_cross_entropy_forward(*gpu, zg, gl.data_as<std::int32_t>(), rows,
                                                    classes, row_loss.data_as<float>(),
                                                    row_correct.data_as<std::int32_t>());
      CHECK(rg.loss_sum == Approx(rc.loss_sum).epsilon(1e-5));
      CHECK(rg.correct == rc.correct);
      CHECK(rg.counted == rc.counted);
      Words dc(z.size());
      softmax_cross_entropy_backward(*cpu, zc, labels.data(), rows, classes, 0.25f,
                                     {dc.data(), dc.size(), p, Device::cpu()});
      Tensor dg = Tensor::empty({z.size()}, p, kGpu);
      softmax_cross_entropy_backward(*gpu, zg, gl.data_as<std::int32_t>(), rows, classes, 0.25f,
                                     dg.buffer());
      const std::vector<float> a = floats_of(dc, p), b = floats_of(words_to_host(dg, *gpu), p);
      for (std::size_t i = 0; i < a.size(); ++i)
        CHECK(b[i] == Approx(a[i]).epsilon(1e-2).margin(1e-6));
      // Written over the logits, as the model does: the same words.
      softmax_cross_entropy_backward(*gpu, zg, gl.data_as<std::int32_t>(), rows, classes, 0.25f,
                                     zg);
      CHECK(words_to_host(gz, *gpu) == words_to_host(dg, *gpu));
    }
  }
}

int main(int argc, char** argv) {
  if (!ringtrain::test::cuda_device_available()) return ringtrain::test::kSkippedExitCode;
  cuda_set_device(0);
  return Catch::Session().run(argc, argv);
}
