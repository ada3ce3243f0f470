// Channels-last (--layout nhwc) on the CPU: each layer that sees [C, H, W]
// activations gives in NHWC what it gives in NCHW (inputs transposed in,
// outputs transposed back and compared), forward and backward; finite
// differences for conv2d, the pools and BatchNorm built channels-last; a
// whole graph model (residual add, concat, BatchNorm, pools, flatten into a
// linear layer) equal in both layouts; the auto rule; and the clear error
// of a layer type that cannot take NHWC.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdlib>
#include <string>

#include "model/layer.h"
#include "ringtrain/core/error.h"
#include "ringtrain/model/gradient_check.h"
#include "ringtrain/model/model.h"
#include "ringtrain/model/model_spec.h"
#include "ringtrain/ops/compute_context.h"
#include "ringtrain/ops/layout_transpose.h"
#include "ringtrain/ops/precision.h"
#include "tests/model/test_data.h"

using namespace ringtrain;

namespace {

const ComputeContext& cpu() {
  static const std::unique_ptr<ComputeContext> ctx = ComputeContext::create(Device::cpu());
  return *ctx;
}

// [C, H, W] per sample changes order; flat samples are the same in both.
std::vector<float> to_nhwc(const std::vector<float>& x, std::size_t batch, const Shape& s) {
  if (s.rank() != 3) return x;
  std::vector<float> y(x.size());
  nchw_to_nhwc(cpu(), x.data(), y.data(), batch, s[0], s[1] * s[2]);
  return y;
}
std::vector<float> to_nchw(const std::vector<float>& x, std::size_t batch, const Shape& s) {
  if (s.rank() != 3) return x;
  std::vector<float> y(x.size());
  nhwc_to_nchw(cpu(), x.data(), y.data(), batch, s[0], s[1] * s[2]);
  return y;
}

// Elementwise |a - b| <= atol + rtol |b|; the first failure is named.
void require_close(const std::vector<float>& a, const std::vector<float>& b,
                   const std::string& what, double atol = 1e-5, double rtol = 1e-5) {
  REQUIRE(a.size() == b.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    INFO(what << "[" << i << "]: nhwc " << a[i] << " vs nchw " << b[i]);
    REQUIRE(std::abs(a[i] - b[i]) <= atol + rtol * std::abs(b[i]));
  }
}

// One layer built twice, NCHW and NHWC, bound to the same parameters and
// state; its inputs in NCHW, transposed for the NHWC twin.
struct TwinLayers {
  DropoutContext dropout{7, 1, 3};
  std::vector<Shape> inputs;
  std::unique_ptr<Layer> nchw, nhwc;
  std::vector<float> params, grads_a, grads_b, buffers_a, buffers_b;

  TwinLayers(const std::string& spec_text, std::vector<Shape> in, std::size_t max_batch)
      : inputs(std::move(in)) {
    // The spec's last node is the layer (earlier ones only name its inputs).
    const ModelSpec spec = ModelSpec::parse(spec_text);
    const LayerSpec& l = spec.layers.back();
    nchw = make_layer(l, inputs, "l", 2, cpu(), max_batch, dropout, Layout::nchw);
    nhwc = make_layer(l, inputs, "l", 2, cpu(), max_batch, dropout, Layout::nhwc);
    std::size_t n = 0;
    for (const ParamDesc& d : nchw->param_descs()) n += d.shape.numel();
    params = test::hashed_vector(99, n, -0.5f, 0.5f);
    grads_a.assign(n, 0.0f);
    grads_b.assign(n, 0.0f);
    nchw->bind(params.data(), grads_a.data());
    nhwc->bind(params.data(), grads_b.data());
    for (const ParamDesc& d : nchw->buffer_descs())
      buffers_a.insert(buffers_a.end(), d.shape.numel(), d.constant);
    buffers_b = buffers_a;
    if (!buffers_a.empty()) {
      nchw->bind_buffers(buffers_a.data());
      nhwc->bind_buffers(buffers_b.data());
    }
  }

  // Forward (training) and backward in both layouts; every result compared in NCHW order.
  void check(std::size_t batch, const std::string& what) {
    const Shape& out = nchw->output_shape();
    const bool spatial_out = out.rank() == 3;
    std::vector<std::vector<float>> xs, xs_t;
    std::vector<const float*> xa, xb;
    for (std::size_t k = 0; k < inputs.size(); ++k) {
      xs.push_back(test::hashed_vector(300 + k, batch * inputs[k].numel(), -2.0f, 2.0f));
      xs_t.push_back(to_nhwc(xs.back(), batch, inputs[k]));
    }
    for (std::size_t k = 0; k < inputs.size(); ++k) {
      xa.push_back(xs[k].data());
      xb.push_back(xs_t[k].data());
    }
    std::vector<float> ya(batch * out.numel()), yb(ya.size());
    nchw->forward_many(xa, ya.data(), batch, true);
    if (nchw->is_view()) ya = xs[0];  // flatten: y is x's memory
    REQUIRE(!nhwc->is_view());
    nhwc->forward_many(xb, yb.data(), batch, true);
    require_close(spatial_out ? to_nchw(yb, batch, out) : yb, ya, what + " y");
    require_close(buffers_b, buffers_a, what + " running statistics");

    const std::vector<float> dy = test::hashed_vector(77, ya.size());
    const std::vector<float> dy_t = spatial_out ? to_nhwc(dy, batch, out) : dy;
    std::vector<std::vector<float>> dxa, dxb;
    std::vector<float*> pa, pb;
    for (const Shape& s : inputs) {
      dxa.emplace_back(batch * s.numel(), 0.0f);
      dxb.emplace_back(batch * s.numel(), 0.0f);
    }
    for (std::size_t k = 0; k < inputs.size(); ++k) {
      pa.push_back(dxa[k].data());
      pb.push_back(dxb[k].data());
    }
    nchw->backward_many(xa, ya.data(), dy.data(), pa, batch, false);
    if (nchw->is_view()) dxa[0] = dy;  // the model passes a view's gradient through
    nhwc->backward_many(xb, yb.data(), dy_t.data(), pb, batch, false);
    for (std::size_t k = 0; k < inputs.size(); ++k)
      require_close(to_nchw(dxb[k], batch, inputs[k]), dxa[k], what + " dx" + std::to_string(k));
    require_close(grads_b, grads_a, what + " parameter gradients", 1e-4, 1e-4);
  }
};

void twin_check(const std::string& spec, std::vector<Shape> inputs, std::size_t batch = 3) {
  TwinLayers t(spec, std::move(inputs), batch);
  t.check(batch, spec);
}

// A layer built channels-last, checked by finite differences (the check
// perturbs elements in whatever order the layer keeps them).
void nhwc_gradient_check(const std::string& spec_text, const Shape& input) {
  const ModelSpec spec = ModelSpec::parse(spec_text);
  DropoutContext dropout;
  auto layer = make_layer(spec.layers[0], input, "l", 0, cpu(), 2, dropout, Layout::nhwc);
  GradientCheckOptions o;
  o.batch = 2;
  const GradientCheckResult r = check_layer_gradients(*layer, o);
  INFO(spec_text << ": " << r.report);
  CHECK(r.checked > 0);
  CHECK(r.ok);
}

// Restores RINGTRAIN_CPU_CONV when the section ends.
struct ConvBackend {
  explicit ConvBackend(const char* value) { setenv("RINGTRAIN_CPU_CONV", value, 1); }
  ~ConvBackend() { unsetenv("RINGTRAIN_CPU_CONV"); }
};

}  // namespace

TEST_CASE("layout: the batched transpose goes there and back", "[layout]") {
  // [2, 3, 5] -> [2, 5, 3]: element (n, i, j) lands at (n, j, i).
  const std::vector<float> x = test::hashed_vector(5, 30);
  std::vector<float> y(30), back(30);
  transpose_batched(cpu(), x.data(), y.data(), 2, 3, 5);
  for (std::size_t n = 0; n < 2; ++n)
    for (std::size_t i = 0; i < 3; ++i)
      for (std::size_t j = 0; j < 5; ++j) CHECK(y[(n * 5 + j) * 3 + i] == x[(n * 3 + i) * 5 + j]);
  transpose_batched(cpu(), y.data(), back.data(), 2, 5, 3);
  CHECK(back == x);
  // A batch of 0 and empty dimensions write nothing.
  transpose_batched(cpu(), x.data(), y.data(), 0, 3, 5);
  transpose_batched(cpu(), x.data(), y.data(), 2, 0, 5);
}

TEST_CASE("layout: conv2d in NHWC equals NCHW (oneDNN and im2col)", "[layout][conv]") {
  for (const char* backend : {"onednn", "im2col"}) {
    ConvBackend b(backend);
    INFO("RINGTRAIN_CPU_CONV=" << backend);
    twin_check("conv2d(out=5, kernel=3, padding=1)", {Shape{3, 6, 7}});
    twin_check("conv2d(out=4, kernel=3, stride=2, padding=1, bias=0)", {Shape{2, 7, 7}});
    twin_check("conv2d(out=6, kernel=1)", {Shape{4, 5, 5}});  // im2col's direct path
    twin_check("conv2d(out=3, kernel=1x3, stride=2x1, padding=0x1)", {Shape{2, 5, 6}});
    twin_check("conv2d(out=2, kernel=2, stride=3)", {Shape{1, 8, 8}}, 1);  // one channel, batch 1
  }
}

TEST_CASE("layout: pools, BatchNorm, merges and elementwise layers in NHWC equal NCHW",
          "[layout]") {
  twin_check("max_pool2d(kernel=2)", {Shape{3, 6, 6}});
  twin_check("max_pool2d(kernel=3, stride=2, padding=1)", {Shape{4, 7, 7}});
  twin_check("avg_pool2d(kernel=3, stride=2, padding=1)", {Shape{3, 7, 6}});
  twin_check("global_avg_pool", {Shape{5, 3, 4}});
  twin_check("batch_norm", {Shape{3, 4, 5}}, 4);
  twin_check("batch_norm(affine=0, momentum=0.3)", {Shape{2, 3, 3}}, 2);
  // Flatten is a view in NCHW and a transpose back to NCHW order in NHWC.
  twin_check("flatten", {Shape{3, 2, 4}});
  twin_check("relu", {Shape{3, 2, 4}});
  // Dropout draws each element's mask by its NCHW index: the same elements drop.
  twin_check("dropout(p=0.4)", {Shape{3, 5, 4}});
  twin_check("a = relu; b = relu; add(a, b, scale=0.5)", {Shape{3, 4, 4}, Shape{3, 4, 4}});
  twin_check("a = relu; b = relu; c = relu; concat(a, b, c)",
             {Shape{3, 4, 4}, Shape{1, 4, 4}, Shape{2, 4, 4}});
  // Flat inputs are the same in either layout.
  twin_check("a = relu; b = relu; concat(a, b)", {Shape{3}, Shape{4}});
  twin_check("batch_norm", {Shape{6}}, 4);
}

TEST_CASE("layout: BatchNorm's statistics in NHWC are NCHW's bit for bit", "[layout][batch_norm]") {
  // The pixels of a channel are summed in the same order in both layouts.
  TwinLayers t("batch_norm", {Shape{3, 4, 5}}, 4);
  std::vector<float> x = test::hashed_vector(11, 4 * 60, -3.0f, 3.0f), ya(x.size()), yb(x.size());
  const std::vector<float> xt = to_nhwc(x, 4, Shape{3, 4, 5});
  t.nchw->forward(x.data(), ya.data(), 4, true);
  t.nhwc->forward(xt.data(), yb.data(), 4, true);
  CHECK(t.buffers_a == t.buffers_b);
  CHECK(to_nchw(yb, 4, Shape{3, 4, 5}) == ya);
}

TEST_CASE("layout: conv2d, pools and BatchNorm built NHWC pass finite differences",
          "[layout][gradient]") {
  nhwc_gradient_check("conv2d(out=3, kernel=3, stride=2, padding=1)", Shape{2, 5, 5});
  {
    ConvBackend b("im2col");
    nhwc_gradient_check("conv2d(out=3, kernel=3, padding=1)", Shape{2, 4, 4});
  }
  nhwc_gradient_check("max_pool2d(kernel=2)", Shape{3, 4, 4});
  nhwc_gradient_check("avg_pool2d(kernel=3, stride=2, padding=1)", Shape{2, 5, 5});
  nhwc_gradient_check("global_avg_pool", Shape{3, 3, 2});
  nhwc_gradient_check("batch_norm", Shape{3, 2, 3});
}

namespace {

// A residual add, a concat of branches, BatchNorm, both pools and a flatten
// into a linear layer: the NHWC model's input is transposed once at the
// start, and back to NCHW at the flatten, so the linear weights read the
// features in NCHW order.
const char* kGraph = R"(input(3, 8, 8)
stem = conv2d(out=4, kernel=3, padding=1, bias=0)
bn = batch_norm
a = relu
b1 = conv2d(a, out=4, kernel=3, padding=1)
sum = add(b1, a)
c1 = conv2d(a, out=2, kernel=1)
cat = concat(sum, c1)
p = max_pool2d(kernel=2)
q = avg_pool2d(kernel=2)
f = flatten
fc = linear(out=5)
)";

std::unique_ptr<Model> build(const std::string& spec, LayoutChoice layout, std::size_t batch) {
  ModelOptions o;
  o.device = Device::cpu();
  o.seed = 3;
  o.max_batch = batch;
  o.layout = layout;
  return Model::build(ModelSpec::parse(spec), {3, 8, 8}, 5, o);
}

}  // namespace

TEST_CASE("layout: a graph model computes the same loss and gradients in NHWC and NCHW",
          "[layout][model]") {
  const std::size_t batch = 4;
  auto a = build(kGraph, LayoutChoice::nchw, batch);
  auto b = build(kGraph, LayoutChoice::nhwc, batch);
  CHECK(a->layout() == Layout::nchw);
  CHECK(b->layout() == Layout::nhwc);
  REQUIRE(a->param_count() == b->param_count());
  const std::vector<float> x = test::hashed_vector(21, batch * 3 * 64);
  const std::vector<std::int32_t> labels{0, 3, 1, 4};
  for (int step = 0; step < 2; ++step) {
    const auto la = a->forward(x.data(), labels.data(), batch, true);
    const auto lb = b->forward(x.data(), labels.data(), batch, true);
    CHECK(lb.loss_sum == Approx(la.loss_sum).epsilon(1e-6));
    CHECK(lb.correct == la.correct);
    a->backward(1.0f, false);
    b->backward(1.0f, false);
    const auto* ga = static_cast<const float*>(a->grads().ptr);
    const auto* gb = static_cast<const float*>(b->grads().ptr);
    require_close(std::vector<float>(gb, gb + b->param_count()),
                  std::vector<float>(ga, ga + a->param_count()), "gradients", 1e-5, 1e-4);
    const auto* ra = static_cast<const float*>(a->buffers().ptr);
    const auto* rb = static_cast<const float*>(b->buffers().ptr);
    CHECK(std::vector<float>(rb, rb + b->buffer_count()) ==
          std::vector<float>(ra, ra + a->buffer_count()));
    // Evaluation mode reads the running statistics.
    const auto ea = a->forward(x.data(), labels.data(), batch, false);
    const auto eb = b->forward(x.data(), labels.data(), batch, false);
    CHECK(eb.loss_sum == Approx(ea.loss_sum).epsilon(1e-6));
  }
}

TEST_CASE("layout: auto is NCHW on the CPU and for models without [C, H, W] input",
          "[layout][model]") {
  CHECK(build(kGraph, LayoutChoice::automatic, 2)->layout() == Layout::nchw);
  ModelOptions o;
  o.device = Device::cpu();
  o.max_batch = 2;
  o.layout = LayoutChoice::nhwc;
  // Nothing to lay out: a flat input stays as it is.
  CHECK(Model::build(ModelSpec::parse("mlp:12-8-3"), {12}, 3, o)->layout() == Layout::nchw);
}

TEST_CASE("layout: auto is NHWC for convolutional models on tensor cores on a GPU", "[layout]") {
  // The rule alone (no device is needed to decide).
  const auto resolve = [](const char* spec, Device d, DType p, LayoutChoice c,
                          std::vector<std::size_t> input = {3, 8, 8},
                          Tf32Mode tf32 = Tf32Mode::off) {
    ModelOptions o;
    o.device = d;
    o.precision = p;
    o.layout = c;
    o.tf32 = tf32;
    return resolve_model_layout(o, ModelSpec::parse(spec), input);
  };
  const Device gpu = Device::cuda(0), host = Device::cpu();
  const auto automatic = LayoutChoice::automatic;
  CHECK(resolve(kGraph, gpu, DType::bf16, automatic) == Layout::nhwc);
  CHECK(resolve(kGraph, gpu, DType::f16, automatic) == Layout::nhwc);
  CHECK(resolve(kGraph, gpu, DType::f32, automatic) == Layout::nchw);  // --tf32 off
  // TF32 convolutions: the default --tf32, and on.
  CHECK(resolve(kGraph, gpu, DType::f32, automatic, {3, 8, 8}, Tf32Mode::pytorch_default) ==
        Layout::nhwc);
  CHECK(resolve(kGraph, gpu, DType::f32, automatic, {3, 8, 8}, Tf32Mode::on) == Layout::nhwc);
  CHECK(resolve(kGraph, host, DType::f32, automatic, {3, 8, 8}, Tf32Mode::on) == Layout::nchw);
  CHECK(resolve(kGraph, host, DType::bf16, automatic) == Layout::nchw);
  CHECK(resolve(kGraph, gpu, DType::f32, LayoutChoice::nhwc) == Layout::nhwc);
  CHECK(resolve(kGraph, gpu, DType::bf16, LayoutChoice::nchw) == Layout::nchw);
  // No convolution, no [C, H, W] input, or a layer that cannot take NHWC: NCHW.
  CHECK(resolve("max_pool2d(kernel=2); flatten; linear(out=5)", gpu, DType::bf16, automatic) ==
        Layout::nchw);
  CHECK(resolve("mlp:12-8-3", gpu, DType::bf16, automatic, {12}) == Layout::nchw);
  CHECK(resolve("conv2d(out=2, kernel=3, padding=1); layer_norm; flatten; linear(out=5)", gpu,
                DType::bf16, automatic) == Layout::nchw);
}

TEST_CASE("layout: a layer type that cannot take NHWC is an error naming it", "[layout][model]") {
  // layer_norm normalises the last dimension: W in NCHW, C in NHWC.
  const char* spec = "conv2d(out=2, kernel=3, padding=1); layer_norm; flatten; linear(out=5)";
  try {
    build(spec, LayoutChoice::nhwc, 2);
    FAIL("layer_norm on channels-last activations was accepted");
  } catch (const Error& e) {
    const std::string what = e.what();
    INFO(what);
    CHECK(what.find("layer_norm") != std::string::npos);
    CHECK(what.find("--layout nchw") != std::string::npos);
  }
  CHECK_NOTHROW(build(spec, LayoutChoice::nchw, 2));
  CHECK_THROWS_WITH(parse_layout_choice("chw"),
                    Catch::Contains("--layout") && Catch::Contains("'chw'"));
}
