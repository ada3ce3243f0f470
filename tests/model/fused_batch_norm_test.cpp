// Fused BatchNorm + ReLU and BatchNorm + add + ReLU (--fuse, the plan's
// rewrite) against the unfused plan, which stays the reference: on small
// ResNet-like graphs in both layouts under fp32, bf16 and fp16 storage, the
// logits, the loss, every parameter gradient and the running statistics are
// the same bits, in training (one backward, then one accumulated) and in
// evaluation. Also: which nodes fuse (and which must not), names and
// parameters unchanged, and a finite-difference check of the fused model.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "ringtrain/model/model.h"
#include "ringtrain/model/model_spec.h"
#include "tests/model/plan_bits.h"
#include "tests/model/test_data.h"

using namespace ringtrain;
using namespace ringtrain::test;

namespace {

// A stem, a plain bn -> relu, a block whose add reads two BatchNorms (the
// first fuses, the downsample's stays), a block whose BatchNorm is the add's
// second input, and a bn -> relu whose BatchNorm has a second reader (not
// fused). r0 and r2 are read twice, so their gradients are summed in fp32.
const char* kResnetLike = R"(input(3, 6, 6)
stem = conv2d(out=4, kernel=3, padding=1, bias=0)
bn0 = batch_norm
r0 = relu
c1 = conv2d(out=4, kernel=3, padding=1, bias=0)
bn1 = batch_norm
r1 = relu
c2 = conv2d(out=6, kernel=3, padding=1, stride=2, bias=0)
bn2 = batch_norm
ds = conv2d(r0, out=6, kernel=1, stride=2, bias=0)
dsbn = batch_norm
sum = add(bn2, dsbn)
r2 = relu
c3 = conv2d(out=6, kernel=3, padding=1, bias=0)
bn3 = batch_norm
sum2 = add(r2, bn3)
r3 = relu
c4 = conv2d(out=6, kernel=1, bias=0)
bn4 = batch_norm
r4 = relu
tap = conv2d(bn4, out=6, kernel=1, bias=0)
both = add(r4, tap)
g = global_avg_pool
fc = linear(out=5)
)";

// Shortcuts shared by two blocks: r0's output is the residual of the fused
// r1 and r2, r1's of the fused r3 and r4. Each of r0 and r1 then has its
// gradient in two terms, both on the storage grid (the fused adds' masked
// dy), which its own fused backward sums as it reads them: on the CPU too,
// where a convolution's dx (fp32, through the adapter) pairs with nothing.
const char* kSharedShortcuts = R"(input(3, 6, 6)
stem = conv2d(out=4, kernel=3, padding=1, bias=0)
bn0 = batch_norm
r0 = relu
c1 = conv2d(stem, out=4, kernel=3, padding=1, bias=0)
bn1 = batch_norm
s1 = add(bn1, r0)
r1 = relu
c2 = conv2d(stem, out=4, kernel=1, bias=0)
bn2 = batch_norm
s2 = add(r0, bn2)
r2 = relu
c3 = conv2d(r2, out=4, kernel=3, padding=1, bias=0)
bn3 = batch_norm
s3 = add(bn3, r1)
r3 = relu
c4 = conv2d(r2, out=4, kernel=1, bias=0)
bn4 = batch_norm
s4 = add(bn4, r1)
r4 = relu
both = add(r3, r4)
g = global_avg_pool
fc = linear(out=5)
)";

constexpr std::size_t kBatch = 4, kClasses = 5;

ModelOptions options(DType precision, LayoutChoice layout, bool fuse) {
  ModelOptions o;
  o.device = Device::cpu();
  o.seed = 7;
  o.max_batch = kBatch;
  o.precision = precision;
  o.layout = layout;
  o.fuse = fuse;
  return o;
}

}  // namespace

TEST_CASE("fused batch_norm + (add +) relu: which nodes fuse, names and parameters unchanged",
          "[model][fusion]") {
  const ModelSpec spec = ModelSpec::parse(kResnetLike);
  auto fused =
      Model::build(spec, {3, 6, 6}, kClasses, options(DType::f32, LayoutChoice::nchw, true));
  auto plain =
      Model::build(spec, {3, 6, 6}, kClasses, options(DType::f32, LayoutChoice::nchw, false));
  REQUIRE(fused->layer_count() == plain->layer_count());
  for (std::size_t i = 0; i < fused->layer_count(); ++i) {
    CHECK(fused->layer_name(i) == plain->layer_name(i));
    CHECK(fused->layer_kind(i) == plain->layer_kind(i));
    CHECK(fused->node_inputs(i) == plain->node_inputs(i));  // the graph as written
    CHECK(fused->layer_param_range(i) == plain->layer_param_range(i));
  }
  REQUIRE(fused->param_info().size() == plain->param_info().size());
  for (std::size_t k = 0; k < fused->param_info().size(); ++k)
    CHECK(fused->param_info()[k].name == plain->param_info()[k].name);
  const auto kernels = [&](const std::string& node) {
    return fused->layer_kernels(node_named(*fused, node));
  };
  CHECK(kernels("r0") == "fused bn0+r0");
  CHECK(kernels("bn0") == "folded into r0");
  CHECK(kernels("r1") == "fused bn1+r1");
  CHECK(kernels("r2") == "fused bn2+sum+r2");
  CHECK(kernels("bn2") == "folded into r2");
  CHECK(kernels("sum") == "folded into r2");
  CHECK(kernels("dsbn").empty());  // the add's other BatchNorm runs on its own
  CHECK(kernels("r3") == "fused bn3+sum2+r3");
  CHECK(kernels("r4").empty());  // bn4 has a second reader
  CHECK(kernels("bn4").empty());
  CHECK(plain->layer_kernels(node_named(*plain, "r0")).empty());
  // The folded nodes hold no activations.
  CHECK(fused->activation_bytes_per_sample() < plain->activation_bytes_per_sample());
}

TEST_CASE("fused batch_norm + (add +) relu: the unfused plan's bits, training and evaluation",
          "[model][fusion][precision]") {
  const bool shared = GENERATE(false, true);
  const ModelSpec spec = ModelSpec::parse(shared ? kSharedShortcuts : kResnetLike);
  const auto precision = GENERATE(DType::f32, DType::bf16, DType::f16);
  const auto layout = GENERATE(LayoutChoice::nchw, LayoutChoice::nhwc);
  INFO((shared ? "shared shortcuts" : "resnet-like")
       << ", precision " << dtype_name(precision) << ", layout "
       << (layout == LayoutChoice::nhwc ? "nhwc" : "nchw"));
  auto fused = Model::build(spec, {3, 6, 6}, kClasses, options(precision, layout, true));
  auto plain = Model::build(spec, {3, 6, 6}, kClasses, options(precision, layout, false));
  REQUIRE(differing(bits_of(fused->params()), bits_of(plain->params())) == 0);
  // The shared shortcuts' gradients in two terms, summed by the fused
  // backward as it reads them (16-bit storage; the unfused plan sums in
  // fp32): the bits below are the same.
  if (shared && precision != DType::f32)
    for (const char* name : {"r0", "r1"}) {
      INFO(name);
      CHECK_THAT(fused->layer_kernels(node_named(*fused, name)),
                 Catch::Contains("summed as its fused backward reads them"));
    }
  const std::vector<float> x1 = test::hashed_vector(31, kBatch * 108, -2.0f, 2.0f);
  const std::vector<float> x2 = test::hashed_vector(32, kBatch * 108, -2.0f, 2.0f);
  const std::vector<std::int32_t> labels{0, 4, 2, 1};
  // fp16 scales the loss, as the trainer does, so that small gradients stay normal.
  const float scale = precision == DType::f16 ? 1024.0f : 1.0f;
  const auto compare = [&](const char* what) {
    INFO(what);
    std::vector<float> fused_logits(kBatch * kClasses), plain_logits(kBatch * kClasses);
    fused->copy_logits(0, fused_logits.data(), fused_logits.size());
    plain->copy_logits(0, plain_logits.data(), plain_logits.size());
    CHECK(differing(bits_of(fused_logits.data(), fused_logits.size()),
                    bits_of(plain_logits.data(), plain_logits.size())) == 0);
    CHECK(differing(bits_of(fused->grads()), bits_of(plain->grads())) == 0);
    CHECK(differing(bits_of(fused->buffers()), bits_of(plain->buffers())) == 0);
  };
  for (Model* m : {fused.get(), plain.get()}) {
    const Model::LossResult r = m->forward(x1.data(), labels.data(), kBatch, true);
    CHECK(std::isfinite(r.loss_sum));
    m->backward(scale, false);
  }
  compare("a training step");
  // The gradients are not all zero (the comparison would prove nothing).
  const std::vector<std::uint32_t> g = bits_of(fused->grads());
  CHECK(std::count(g.begin(), g.end(), 0u) < static_cast<std::ptrdiff_t>(g.size() / 4));
  double loss[2];
  int k = 0;
  for (Model* m : {fused.get(), plain.get()}) {
    loss[k++] = m->forward(x2.data(), labels.data(), kBatch, true).loss_sum;
    m->backward(scale, true);
  }
  CHECK(loss[0] == loss[1]);
  compare("a second, accumulated step");
  k = 0;
  for (Model* m : {fused.get(), plain.get()})
    loss[k++] = m->forward(x2.data(), labels.data(), kBatch, false).loss_sum;
  CHECK(loss[0] == loss[1]);
  compare("evaluation");
}

TEST_CASE("fused batch_norm + (add +) relu: dy read in two terms, the bits of their summing pass",
          "[model][fusion][precision]") {
  // RINGTRAIN_FUSED_DY_TERMS=off keeps the pass that sums a paired
  // gradient before the fused backward reads it: the same model trains to
  // the same bits either way (gpu_fused_batch_norm_test does this on a GPU,
  // where every ResNet block output pairs).
  const auto precision = GENERATE(DType::bf16, DType::f16);
  const auto layout = GENERATE(LayoutChoice::nchw, LayoutChoice::nhwc);
  INFO("precision " << dtype_name(precision) << ", layout "
                    << (layout == LayoutChoice::nhwc ? "nhwc" : "nchw"));
  const std::vector<float> x1 = test::hashed_vector(41, kBatch * 108, -2.0f, 2.0f);
  const std::vector<float> x2 = test::hashed_vector(42, kBatch * 108, -2.0f, 2.0f);
  const std::vector<std::int32_t> labels{3, 0, 4, 1};
  const float scale = precision == DType::f16 ? 1024.0f : 1.0f;
  const auto train = [&](bool two_terms) {
    if (two_terms)
      ::unsetenv("RINGTRAIN_FUSED_DY_TERMS");
    else
      ::setenv("RINGTRAIN_FUSED_DY_TERMS", "off", 1);
    auto m = Model::build(ModelSpec::parse(kSharedShortcuts), {3, 6, 6}, kClasses,
                          options(precision, layout, true));
    ::unsetenv("RINGTRAIN_FUSED_DY_TERMS");
    CHECK_THAT(m->layer_kernels(node_named(*m, "r1")),
               Catch::Contains(two_terms ? "summed as its fused backward reads them"
                                         : "summed in one pass"));
    m->forward(x1.data(), labels.data(), kBatch, true);
    m->backward(scale, false);
    m->forward(x2.data(), labels.data(), kBatch, true);
    m->backward(scale, true);
    std::vector<std::uint32_t> bits = bits_of(m->grads());
    const std::vector<std::uint32_t> running = bits_of(m->buffers());
    bits.insert(bits.end(), running.begin(), running.end());
    return bits;
  };
  const std::vector<std::uint32_t> two = train(true), summed = train(false);
  CHECK(differing(two, summed) == 0);
}

TEST_CASE("fused batch_norm + (add +) relu: gradients match finite differences in fp32",
          "[model][fusion][gradient]") {
  // Smaller than kResnetLike, so that every parameter is checked.
  const char* graph = R"(input(2, 4, 4)
stem = conv2d(out=3, kernel=3, padding=1, bias=0)
bn0 = batch_norm
r0 = relu
c1 = conv2d(out=3, kernel=3, padding=1, bias=0)
bn1 = batch_norm
sum = add(bn1, r0)
r1 = relu
g = global_avg_pool
fc = linear(out=3)
)";
  const std::size_t batch = 4;
  ModelOptions o = options(DType::f32, LayoutChoice::nchw, true);
  auto m = Model::build(ModelSpec::parse(graph), {2, 4, 4}, 3, o);
  REQUIRE(m->layer_kernels(node_named(*m, "r1")) == "fused bn1+sum+r1");
  const std::vector<float> x = test::hashed_vector(4, batch * 32, -1.5f, 1.5f);
  const std::vector<std::int32_t> labels{0, 2, 1, 2};
  check_parameter_gradients(*m, test::hashed_vector(3, m->param_count(), -0.6f, 0.6f), x, labels);
}
