// A layer that stores its activations in the model's 16-bit dtype
// (StoresActivations) must give the numbers of its fp32 form followed by
// narrowing, bit for bit: that is what keeps a bf16/fp16 run's numbers when
// the model stops widening around it. Each stored layer is run both ways on
// the CPU, on inputs on the 16-bit grid, under bf16 and fp16, with its input
// gradients in the storage dtype and in fp32 (a node read by several nodes,
// where the model sums in fp32), and in both layouts where it has [C, H, W]
// input. Layers that do not store (a three-input add) say so.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "kernels/precision.cuh"
#include "model/layer.h"
#include "ringtrain/model/model_spec.h"
#include "ringtrain/ops/compute_context.h"
#include "ringtrain/ops/merge.h"
#include "ringtrain/ops/precision.h"
#include "ringtrain/ops/softmax_cross_entropy.h"
#include "ringtrain/tensor/tensor.h"
#include "tests/model/grid_values.h"
#include "tests/model/test_data.h"

using namespace ringtrain;
using test::on_grid;

namespace {

// The 16-bit words of v in dtype p (v on its grid: exact).
std::vector<std::uint16_t> narrow(const ComputeContext& ctx, const std::vector<float>& v, DType p) {
  std::vector<std::uint16_t> out(v.size());
  convert_storage(ctx, BufferView{out.data(), out.size(), p, Device::cpu()},
                  view_of(v.data(), v.size()));
  return out;
}

// The last node of `graph` (the others only name its inputs), built for
// `inputs`, with its parameters (if any) on the grid and its buffers at their
// initial values.
struct Node {
  std::unique_ptr<Layer> layer;
  std::vector<float> params, grads, buffers;
};
Node node(const std::string& graph, const std::vector<Shape>& inputs, const ComputeContext& ctx,
          DType p, Layout layout) {
  static const DropoutContext dropout{};
  const ModelSpec spec = ModelSpec::parse(graph);
  Node n;
  n.layer = make_layer(spec.layers.back(), inputs, "l", 0, ctx, 2, dropout, layout);
  std::size_t np = 0;
  for (const ParamDesc& d : n.layer->param_descs()) np += d.shape.numel();
  n.params = on_grid(21, np, p);
  n.grads.assign(np, 0.0f);
  n.layer->bind(n.params.data(), n.grads.data());
  for (const ParamDesc& d : n.layer->buffer_descs())
    n.buffers.insert(n.buffers.end(), d.shape.numel(), d.constant);
  if (!n.buffers.empty()) n.layer->bind_buffers(n.buffers.data());
  return n;
}

// Runs `graph`'s last node on `inputs` (per-sample shapes) both ways and
// checks the stored form against the fp32 form plus narrowing.
void check_stored(const std::string& graph, const std::vector<Shape>& inputs,
                  Layout layout = Layout::nchw) {
  const std::size_t batch = 2;
  for (const DType p : {DType::bf16, DType::f16}) {
    for (const bool fp32_dx : {false, true}) {
      INFO(graph << " " << dtype_name(p) << (fp32_dx ? " dx fp32" : " dx stored")
                 << (layout == Layout::nhwc ? " nhwc" : " nchw"));
      const auto ctx = ComputeContext::create(Device::cpu(), Tf32Mode::pytorch_default, p);
      // The fp32 form, then the reference: its outputs narrowed.
      Node wide = node(graph, inputs, *ctx, p, layout);
      Node typed = node(graph, inputs, *ctx, p, layout);
      auto* stores = dynamic_cast<StoresActivations*>(typed.layer.get());
      REQUIRE(stores != nullptr);
      REQUIRE(stores->stores_activations());
      const std::size_t out = batch * wide.layer->output_shape().numel();
      std::vector<std::vector<float>> x, dx;
      std::vector<const float*> xs;
      std::vector<float*> dxs;
      for (std::size_t k = 0; k < inputs.size(); ++k) {
        x.push_back(on_grid(30 + k, batch * inputs[k].numel(), p));
        dx.emplace_back(batch * inputs[k].numel());
      }
      for (std::size_t k = 0; k < inputs.size(); ++k) {
        xs.push_back(x[k].data());
        dxs.push_back(dx[k].data());
      }
      const auto dy = on_grid(40, out, p);
      std::vector<float> y(out);
      if (inputs.size() == 1) {
        wide.layer->forward(xs[0], y.data(), batch, true);
        for (float& e : y) e = kernels::round_to_precision_grid(e, p);
        wide.layer->backward(xs[0], y.data(), dy.data(), dxs[0], batch, false);
      } else {
        wide.layer->forward_many(xs, y.data(), batch, true);
        for (float& e : y) e = kernels::round_to_precision_grid(e, p);
        wide.layer->backward_many(xs, y.data(), dy.data(), dxs, batch, false);
      }
      // The stored form on the 16-bit words.
      std::vector<std::vector<std::uint16_t>> x16;
      std::vector<BufferView> xv, dxv;
      std::vector<std::vector<std::uint16_t>> dx16;
      std::vector<std::vector<float>> dx32;
      for (std::size_t k = 0; k < inputs.size(); ++k) {
        x16.push_back(narrow(*ctx, x[k], p));
        dx16.emplace_back(x[k].size(), 0x7fff);
        dx32.emplace_back(x[k].size(), -1.0f);
      }
      for (std::size_t k = 0; k < inputs.size(); ++k) {
        xv.push_back({x16[k].data(), x16[k].size(), p, Device::cpu()});
        dxv.push_back(fp32_dx ? view_of(dx32[k].data(), dx32[k].size())
                              : BufferView{dx16[k].data(), dx16[k].size(), p, Device::cpu()});
      }
      std::vector<std::uint16_t> y16(out), dy16 = narrow(*ctx, dy, p);
      const BufferView yv{y16.data(), out, p, Device::cpu()};
      stores->forward_stored(xv, yv, batch, true);
      stores->backward_stored(xv, yv, {dy16.data(), out, p, Device::cpu()}, dxv, batch, false);
      CHECK(y16 == narrow(*ctx, y, p));
      for (std::size_t k = 0; k < inputs.size(); ++k) {
        INFO("input " << k);
        if (fp32_dx) {
          CHECK(dx32[k] == dx[k]);
        } else {
          for (float& e : dx[k]) e = kernels::round_to_precision_grid(e, p);
          CHECK(dx16[k] == narrow(*ctx, dx[k], p));
        }
      }
      CHECK(typed.grads == wide.grads);
    }
  }
}

}  // namespace

TEST_CASE("stored layers: relu", "[model][precision]") {
  check_stored("relu", {Shape{3, 4, 5}});
  check_stored("relu", {Shape{3, 4, 5}}, Layout::nhwc);
}

TEST_CASE("stored layers: a two-input add, unscaled and scaled", "[model][precision]") {
  check_stored("a = relu; b = relu; y = add(a, b)", {Shape{4, 3, 3}, Shape{4, 3, 3}});
  check_stored("a = relu; b = relu; y = add(a, b, scale=0.3)", {Shape{7}, Shape{7}});
}

TEST_CASE("add_widened: a 16-bit contribution added into an fp32 sum, as widened then added",
          "[model][precision]") {
  // What the model does with a 16-bit convolution's dx at a branch point: the
  // same bits as widening it into fp32 scratch and adding that.
  for (const DType p : {DType::bf16, DType::f16, DType::f32}) {
    CAPTURE(dtype_name(p));
    const auto ctx = ComputeContext::create(Device::cpu(), Tf32Mode::pytorch_default, p);
    const std::size_t n = 1001;
    const std::vector<float> x = on_grid(41, n, p);
    std::vector<float> sum = test::hashed_vector(42, n, -3.0f, 3.0f);
    std::vector<float> want = sum;
    add_scaled(*ctx, want.data(), x.data(), 1.0f, n);
    Tensor stored = Tensor::empty({n}, p, Device::cpu());
    convert_storage(*ctx, stored.buffer(), view_of(x.data(), n));
    add_widened(*ctx, view_of(sum.data(), n), stored.buffer());
    CHECK(sum == want);
  }
  const auto ctx = ComputeContext::create(Device::cpu(), Tf32Mode::pytorch_default, DType::bf16);
  std::vector<float> a(4), b(3);
  CHECK_THROWS_WITH(add_widened(*ctx, view_of(a.data(), 4), view_of(b.data(), 3)),
                    Catch::Contains("same count"));
}

TEST_CASE("narrow_sum: the waiting terms added in order and narrowed, as added one by one",
          "[model][precision]") {
  // What the model does at a branch point's reader: the contributions that
  // waited in their scratch, added to the fp32 sum in the order they were
  // made and narrowed in one pass; the same bits as adding each
  // (add_widened, add_scaled) and then convert_storage. The terms sum to
  // large, tiny and cancelling values, so that the order shows in the bits.
  for (const DType p : {DType::bf16, DType::f16}) {
    const auto ctx = ComputeContext::create(Device::cpu(), Tf32Mode::pytorch_default, p);
    for (const DType term_type : {p, DType::f32})
      for (std::size_t count = 1; count <= kNarrowSumMaxTerms; ++count) {
        CAPTURE(dtype_name(p), dtype_name(term_type), count);
        const std::size_t n = 1001;
        const std::vector<float> sum = test::hashed_vector(60, n, -3000.0f, 3000.0f);
        std::vector<Tensor> kept;
        std::vector<BufferView> terms;
        std::vector<float> want = sum;
        for (std::size_t k = 0; k < count; ++k) {
          std::vector<float> t = term_type == DType::f32
                                     ? test::hashed_vector(61 + k, n, -3000.0f, 3000.0f)
                                     : on_grid(61 + k, n, p);
          if (k == 1)
            for (std::size_t i = 0; i < n; i += 3) t[i] = -sum[i];  // cancels the sum
          kept.push_back(Tensor::empty({n}, term_type, Device::cpu()));
          convert_storage(*ctx, kept.back().buffer(), view_of(t.data(), n));
          terms.push_back(kept.back().buffer());
          if (term_type == DType::f32)
            add_scaled(*ctx, want.data(), kept.back().data_as<float>(), 1.0f, n);
          else
            add_widened(*ctx, view_of(want.data(), n), kept.back().buffer());
        }
        Tensor want16 = Tensor::empty({n}, p, Device::cpu());
        convert_storage(*ctx, want16.buffer(), view_of(want.data(), n));
        std::vector<float> sum_copy = sum;
        Tensor got16 = Tensor::empty({n}, p, Device::cpu());
        narrow_sum(*ctx, got16.buffer(), view_of(sum_copy.data(), n), terms);
        CHECK(std::memcmp(got16.data(), want16.data(), n * 2) == 0);
        CHECK(sum_copy == sum);  // read, not written
      }
  }
  const auto ctx = ComputeContext::create(Device::cpu(), Tf32Mode::pytorch_default, DType::bf16);
  std::vector<float> sum(4), f32_term(4);
  Tensor out = Tensor::empty({4}, DType::bf16, Device::cpu());
  Tensor bf16_term = Tensor::zeros({4}, DType::bf16, Device::cpu());
  const BufferView s = view_of(sum.data(), 4), f = view_of(f32_term.data(), 4);
  const std::vector<BufferView> five(5, f), mixed = {f, bf16_term.buffer()}, none;
  CHECK_THROWS_WITH(narrow_sum(*ctx, out.buffer(), s, five), Catch::Contains("5 terms"));
  CHECK_THROWS_WITH(narrow_sum(*ctx, out.buffer(), s, none), Catch::Contains("0 terms"));
  CHECK_THROWS_WITH(narrow_sum(*ctx, out.buffer(), s, mixed), Catch::Contains("one dtype"));
  CHECK_THROWS_WITH(narrow_sum(*ctx, out.buffer(), s, std::vector<BufferView>{f.slice(0, 3)}),
                    Catch::Contains("one dtype and sum's count"));
  CHECK_THROWS_WITH(narrow_sum(*ctx, BufferView{sum.data(), 4, DType::f32, Device::cpu()}, s,
                               std::vector<BufferView>{f}),
                    Catch::Contains("16-bit output"));
}

TEST_CASE("convert_storage narrows a summed gradient to the bits of rounding it to the grid first",
          "[model][precision]") {
  // The backward narrows a summed fp32 gradient for a 16-bit layer in one
  // conversion, without rounding the sum in place: the same bits as both steps.
  for (const DType p : {DType::bf16, DType::f16}) {
    CAPTURE(dtype_name(p));
    const auto ctx = ComputeContext::create(Device::cpu(), Tf32Mode::pytorch_default, p);
    const std::size_t n = 1003;
    std::vector<float> sum = test::hashed_vector(43, n, -70000.0f, 70000.0f);
    sum[0] = 1e-30f, sum[1] = -0.0f, sum[2] = 65519.0f, sum[3] = 65520.0f;
    sum[4] = std::numeric_limits<float>::quiet_NaN(), sum[5] = -INFINITY;
    const std::vector<float> before = sum;
    std::vector<float> rounded = sum;
    round_to_precision(*ctx, rounded.data(), rounded.data(), n, p);
    Tensor want16 = Tensor::empty({n}, p, Device::cpu());
    convert_storage(*ctx, want16.buffer(), view_of(rounded.data(), n));
    Tensor got16 = Tensor::empty({n}, p, Device::cpu());
    convert_storage(*ctx, got16.buffer(), view_of(sum.data(), n));
    CHECK(std::memcmp(got16.data(), want16.data(), n * 2) == 0);
    CHECK(std::memcmp(sum.data(), before.data(), n * sizeof(float)) == 0);  // read only
  }
}

TEST_CASE("stored layers: the layers that do not store say so", "[model][precision]") {
  const auto ctx = ComputeContext::create(Device::cpu(), Tf32Mode::pytorch_default, DType::bf16);
  Node three = node("a = relu; b = relu; c = relu; y = add(a, b, c)",
                    {Shape{5}, Shape{5}, Shape{5}}, *ctx, DType::bf16, Layout::nchw);
  const auto* stores = dynamic_cast<StoresActivations*>(three.layer.get());
  CHECK((stores == nullptr || !stores->stores_activations()));
  Node gelu = node("gelu", {Shape{5}}, *ctx, DType::bf16, Layout::nchw);
  stores = dynamic_cast<StoresActivations*>(gelu.layer.get());
  CHECK((stores == nullptr || !stores->stores_activations()));
}

TEST_CASE("stored layers: batch_norm over images in both layouts, and over features",
          "[model][precision]") {
  check_stored("batch_norm", {Shape{3, 4, 5}});
  check_stored("batch_norm", {Shape{3, 4, 5}}, Layout::nhwc);
  check_stored("batch_norm", {Shape{6}});
}

TEST_CASE("stored layers: max and average pooling with overlapping windows, in both layouts",
          "[model][precision]") {
  for (const Layout layout : {Layout::nchw, Layout::nhwc}) {
    check_stored("max_pool2d(kernel=3, stride=2, padding=1)", {Shape{3, 7, 6}}, layout);
    check_stored("avg_pool2d(kernel=3, stride=2, padding=1)", {Shape{3, 7, 6}}, layout);
    check_stored("max_pool2d(kernel=2, stride=2)", {Shape{2, 4, 4}}, layout);
  }
}

TEST_CASE("stored layers: global_avg_pool in both layouts", "[model][precision]") {
  check_stored("global_avg_pool", {Shape{5, 3, 4}});
  check_stored("global_avg_pool", {Shape{5, 3, 4}}, Layout::nhwc);
}

TEST_CASE("stored layers: dropout and concat in both layouts", "[model][precision]") {
  for (const Layout layout : {Layout::nchw, Layout::nhwc}) {
    check_stored("dropout(p=0.3)", {Shape{3, 4, 5}}, layout);
    check_stored("a = relu; b = relu; y = concat(a, b)", {Shape{2, 3, 4}, Shape{3, 3, 4}}, layout);
  }
  check_stored("a = relu; b = relu; y = concat(a, b)", {Shape{5}, Shape{2}});
}

TEST_CASE("stored layers: layer_norm over rows", "[model][precision]") {
  check_stored("layer_norm", {Shape{3, 16}});
  check_stored("layer_norm", {Shape{8}});
}

TEST_CASE("stored layers: GPT-2's tanh GELU", "[model][precision]") {
  check_stored("gelu_tanh", {Shape{3, 16}});
}

TEST_CASE("stored layers: flatten's channels-last transpose", "[model][precision]") {
  check_stored("flatten", {Shape{3, 4, 5}}, Layout::nhwc);
}

TEST_CASE("stored layers: the position embedding", "[model][precision]") {
  check_stored("position_embedding(context=6)", {Shape{4, 5}});
}

TEST_CASE("stored layers: the token embedding takes its ids in fp32", "[model][precision]") {
  const std::size_t batch = 2, t = 5, vocab = 7, dim = 4;
  for (const DType p : {DType::bf16, DType::f16}) {
    const auto ctx = ComputeContext::create(Device::cpu(), Tf32Mode::pytorch_default, p);
    Node wide = node("token_embedding(vocab=7, dim=4)", {Shape{t}}, *ctx, p, Layout::nchw);
    Node typed = node("token_embedding(vocab=7, dim=4)", {Shape{t}}, *ctx, p, Layout::nchw);
    auto* stores = dynamic_cast<StoresActivations*>(typed.layer.get());
    REQUIRE(stores != nullptr);
    std::vector<float> ids(batch * t);
    for (std::size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<float>((i * 3) % vocab);
    const auto dy = on_grid(40, batch * t * dim, p);
    std::vector<float> y(batch * t * dim);
    wide.layer->forward(ids.data(), y.data(), batch, true);
    wide.layer->backward(ids.data(), y.data(), dy.data(), nullptr, batch, false);
    std::vector<std::uint16_t> y16(y.size()), dy16 = narrow(*ctx, dy, p);
    const BufferView yv{y16.data(), y16.size(), p, Device::cpu()};
    const std::vector<BufferView> xs{view_of(ids.data(), ids.size())};
    stores->forward_stored(xs, yv, batch, true);
    stores->backward_stored(xs, yv, {dy16.data(), dy16.size(), p, Device::cpu()},
                            {BufferView{nullptr, 0, DType::f32, Device::cpu()}}, batch, false);
    for (float& e : y) e = kernels::round_to_precision_grid(e, p);
    CHECK(y16 == narrow(*ctx, y, p));
    CHECK(typed.grads == wide.grads);
  }
}

TEST_CASE("stored layers: the loss reads 16-bit logits and writes a 16-bit gradient",
          "[model][precision]") {
  // The same loss as on the logits widened, and the gradient of the fp32
  // loss narrowed, bit for bit; with label smoothing, a mix and an ignored row.
  const std::size_t rows = 5, classes = 7;
  const std::vector<std::int32_t> labels{3, 0, -100, 6, 2}, second{1, 0, 4, 6, 5};
  for (const DType p : {DType::bf16, DType::f16}) {
    for (const bool mixed : {false, true}) {
      INFO(dtype_name(p) << (mixed ? " mixed" : ""));
      const auto ctx = ComputeContext::create(Device::cpu(), Tf32Mode::pytorch_default, p);
      const auto z = on_grid(50, rows * classes, p);
      auto z16 = narrow(*ctx, z, p);
      const BufferView zv{z16.data(), z16.size(), p, Device::cpu()};
      const LabelMix mix = mixed ? LabelMix{second.data(), 0.7f} : LabelMix{};
      const float smoothing = mixed ? 0.1f : 0.0f;
      double wide_totals[3] = {}, typed_totals[3] = {};
      softmax_cross_entropy_accumulate(*ctx, z.data(), labels.data(), rows, classes, nullptr,
                                       nullptr, wide_totals, smoothing, mix);
      softmax_cross_entropy_accumulate(*ctx, zv, labels.data(), rows, classes, nullptr, nullptr,
                                       typed_totals, smoothing, mix);
      CHECK(typed_totals[0] == wide_totals[0]);
      CHECK(typed_totals[1] == wide_totals[1]);
      std::vector<float> dz(rows * classes);
      softmax_cross_entropy_backward(*ctx, z.data(), labels.data(), rows, classes, 0.3f, dz.data(),
                                     smoothing, mix);
      std::vector<std::uint16_t> dz16(dz.size());
      softmax_cross_entropy_backward(*ctx, zv, labels.data(), rows, classes, 0.3f,
                                     {dz16.data(), dz16.size(), p, Device::cpu()}, smoothing, mix);
      for (float& e : dz) e = kernels::round_to_precision_grid(e, p);
      CHECK(dz16 == narrow(*ctx, dz, p));
      // Written over the logits (the model's in-place logits gradient): the same words.
      softmax_cross_entropy_backward(*ctx, zv, labels.data(), rows, classes, 0.3f, zv, smoothing,
                                     mix);
      CHECK(z16 == dz16);
    }
  }
  // Another dtype is refused, naming it.
  const auto ctx = ComputeContext::create(Device::cpu(), Tf32Mode::pytorch_default, DType::f32);
  std::vector<std::int32_t> ids(rows * classes);
  CHECK_THROWS_WITH(softmax_cross_entropy_forward(
                        *ctx, BufferView{ids.data(), ids.size(), DType::i32, Device::cpu()},
                        labels.data(), rows, classes, nullptr, nullptr),
                    Catch::Contains("not a storage dtype"));
}
