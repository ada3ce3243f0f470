// The transformer layers: finite-difference gradient checks of each (the
// token embedding and the tied head by hand, since their inputs and weights
// are special), the ignore label of the per-token loss, and a whole small GPT
// through Model, whose tied head and embedding share one gradient.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <map>

#include "model/layer.h"
#include "model/tied_lm_head_layer.h"
#include "ringtrain/data/token_data.h"
#include "ringtrain/model/gradient_check.h"
#include "ringtrain/model/model.h"
#include "ringtrain/model/model_spec.h"
#include "ringtrain/model/presets.h"
#include "ringtrain/ops/compute_context.h"
#include "ringtrain/ops/softmax_cross_entropy.h"
#include "tests/model/test_data.h"

using namespace ringtrain;

namespace {

std::unique_ptr<Layer> build(const std::string& spec_text, const Shape& input,
                             const ComputeContext& ctx, std::size_t max_batch = 4) {
  static const DropoutContext dropout{};
  const ModelSpec spec = ModelSpec::parse(spec_text);
  REQUIRE(spec.layers.size() == 1);
  return make_layer(spec.layers[0], input, "l", 0, ctx, max_batch, dropout);
}

void require_gradients(Layer& layer, GradientCheckOptions o = {}) {
  const GradientCheckResult r = check_layer_gradients(layer, o);
  INFO(r.report);
  CHECK(r.checked > 0);
  CHECK(r.ok);
}

}  // namespace

TEST_CASE("layer_norm, position_embedding, gelu_tanh, linear over rows: gradients",
          "[layer][gradient][transformer]") {
  auto ctx = ComputeContext::create(Device::cpu());
  for (std::size_t batch : {1, 3}) {
    GradientCheckOptions o;
    o.batch = batch;
    auto ln = build("layer_norm", Shape{3, 6}, *ctx);
    CHECK(ln->output_shape() == Shape{3, 6});
    require_gradients(*ln, o);
    auto pe = build("position_embedding(context=5)", Shape{4, 3}, *ctx);
    require_gradients(*pe, o);
    auto g = build("gelu_tanh", Shape{4, 5}, *ctx);
    require_gradients(*g, o);
    auto fc = build("linear(out=5)", Shape{4, 3}, *ctx);
    CHECK(fc->output_shape() == Shape{4, 5});
    require_gradients(*fc, o);
  }
}

TEST_CASE("gelu_tanh is GPT-2's tanh form", "[layer][transformer]") {
  auto ctx = ComputeContext::create(Device::cpu());
  auto g = build("gelu_tanh", Shape{7}, *ctx);
  const float x[7] = {-30.0f, -2.0f, -1e-4f, 0.0f, 0.5f, 3.0f, 60.0f};
  float y[7];
  g->forward(x, y, 1, false);
  for (int i = 0; i < 7; ++i) {
    const double v = x[i];
    const double want =
        0.5 * v * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (v + 0.044715 * v * v * v)));
    CHECK(y[i] == Approx(want).margin(2e-7 * std::max(1.0, std::abs(v))));
  }
}

TEST_CASE("causal_self_attention: gradients, and the future does not leak",
          "[layer][gradient][transformer]") {
  auto ctx = ComputeContext::create(Device::cpu());
  for (std::size_t heads : {1, 2}) {
    CAPTURE(heads);
    auto attn =
        build("causal_self_attention(heads=" + std::to_string(heads) + ")", Shape{5, 4}, *ctx);
    GradientCheckOptions o;
    o.batch = 2;
    require_gradients(*attn, o);
  }
  // Changing the last position's input changes no earlier output.
  auto attn = build("causal_self_attention(heads=2)", Shape{4, 6}, *ctx);
  std::vector<float> params = test::hashed_vector(5, 4 * 6 * 6 + 4 * 6, -0.5f, 0.5f),
                     grads(params.size());
  attn->bind(params.data(), grads.data());
  std::vector<float> x = test::hashed_vector(6, 24), y1(24), y2(24);
  attn->forward(x.data(), y1.data(), 1, false);
  for (std::size_t j = 18; j < 24; ++j) x[j] += 0.7f;
  attn->forward(x.data(), y2.data(), 1, false);
  for (std::size_t j = 0; j < 18; ++j) CHECK(y1[j] == y2[j]);
  bool last_changed = false;
  for (std::size_t j = 18; j < 24; ++j) last_changed = last_changed || y1[j] != y2[j];
  CHECK(last_changed);
  CHECK_THROWS_WITH(build("causal_self_attention(heads=4)", Shape{4, 6}, *ctx),
                    Catch::Contains("width 6 is not a multiple of 4 heads"));
}

TEST_CASE("causal_self_attention dropout: gradients through the mask, off in evaluation, keyed",
          "[layer][gradient][transformer][dropout]") {
  auto ctx = ComputeContext::create(Device::cpu());
  // Training draws the mask from (seed, rank, step, node, head): fixed here, so
  // finite differences see the same mask as backward's recomputed one.
  auto dropped = build("causal_self_attention(heads=2, dropout=0.3)", Shape{5, 4}, *ctx);
  GradientCheckOptions o;
  o.batch = 2;
  require_gradients(*dropped, o);

  DropoutContext dc{11, 1, 7};
  const ModelSpec with = ModelSpec::parse("causal_self_attention(heads=2, dropout=0.5)");
  const ModelSpec without = ModelSpec::parse("causal_self_attention(heads=2)");
  CHECK(with.layers[0].to_string() == "causal_self_attention(heads=2, dropout=0.5)");
  auto a = make_layer(with.layers[0], Shape{6, 4}, "a", 3, *ctx, 2, dc);
  auto b = make_layer(without.layers[0], Shape{6, 4}, "b", 3, *ctx, 2, dc);
  std::vector<float> params = test::hashed_vector(9, 4 * 4 * 4 + 4 * 4, -0.5f, 0.5f),
                     grads(params.size());
  a->bind(params.data(), grads.data());
  b->bind(params.data(), grads.data());
  const std::vector<float> x = test::hashed_vector(10, 2 * 24);
  std::vector<float> eval_a(48), eval_b(48), train1(48), train2(48), train3(48);
  a->forward(x.data(), eval_a.data(), 2, false);
  b->forward(x.data(), eval_b.data(), 2, true);
  CHECK(eval_a == eval_b);  // evaluation (generate too) never drops
  a->forward(x.data(), train1.data(), 2, true);
  a->forward(x.data(), train2.data(), 2, true);
  CHECK(train1 == train2);  // a pure function of the key: a resume repeats it
  CHECK(train1 != eval_a);
  dc.step = 8;
  a->forward(x.data(), train3.data(), 2, true);
  CHECK(train3 != train1);
  CHECK_THROWS_WITH(ModelSpec::parse("causal_self_attention(heads=2, dropout=1)"),
                    Catch::Contains("dropout"));
}

TEST_CASE("token_embedding: rows of the weight, scatter-added gradients", "[layer][transformer]") {
  auto ctx = ComputeContext::create(Device::cpu());
  auto emb = build("token_embedding(vocab=7, dim=3)", Shape{4}, *ctx);
  REQUIRE(emb->output_shape() == Shape{4, 3});
  std::vector<float> w = test::hashed_vector(8, 21), dw(21, 5.0f);
  emb->bind(w.data(), dw.data());
  const std::vector<float> ids{6, 0, 6, 2, 1, 1, 3, 4};  // two samples; repeats add
  std::vector<float> y(24), dy = test::hashed_vector(9, 24), dx(8, 1.0f);
  emb->forward(ids.data(), y.data(), 2, true);
  for (std::size_t r = 0; r < 8; ++r)
    for (std::size_t j = 0; j < 3; ++j)
      CHECK(y[r * 3 + j] == w[static_cast<std::size_t>(ids[r]) * 3 + j]);
  emb->backward(ids.data(), y.data(), dy.data(), dx.data(), 2, false);
  // dL/dW[v] for L = sum(y * dy) is the sum of dy over the rows reading v.
  for (std::size_t v = 0; v < 7; ++v)
    for (std::size_t j = 0; j < 3; ++j) {
      double want = 0;
      for (std::size_t r = 0; r < 8; ++r)
        if (static_cast<std::size_t>(ids[r]) == v) want += dy[r * 3 + j];
      CHECK(dw[v * 3 + j] == Approx(want).margin(1e-6));
    }
  for (float g : dx) CHECK(g == 0.0f);
  const std::vector<float> bad{1, 7, 0, 0};
  CHECK_THROWS_WITH(emb->forward(bad.data(), y.data(), 1, true),
                    Catch::Contains("input 7 of sample 0 position 1 is not a token id in [0, 7)"));
  const std::vector<float> fractional{1, 2.5f, 0, 0};
  CHECK_THROWS_WITH(emb->forward(fractional.data(), y.data(), 1, true),
                    Catch::Contains("is not a token id"));
}

TEST_CASE("lm_head: logits x E^T with the embedding's weight; gradients by differences",
          "[layer][gradient][transformer]") {
  auto ctx = ComputeContext::create(Device::cpu());
  TiedLmHeadLayer head("lm_head", Shape{3, 4}, "wte", 5, *ctx);
  CHECK(head.tied_to() == "wte");
  CHECK(head.param_descs().empty());
  std::vector<float> e = test::hashed_vector(10, 20), de(20, 0.0f);
  head.bind(e.data(), de.data());
  const std::size_t batch = 2;
  std::vector<float> x = test::hashed_vector(11, batch * 12), y(batch * 15), dx(batch * 12);
  const std::vector<float> r = test::hashed_vector(12, batch * 15);
  head.forward(x.data(), y.data(), batch, true);
  head.backward(x.data(), y.data(), r.data(), dx.data(), batch, false);
  auto loss = [&] {
    std::vector<float> out(batch * 15);
    head.forward(x.data(), out.data(), batch, true);
    double s = 0;
    for (std::size_t i = 0; i < out.size(); ++i) s += static_cast<double>(out[i]) * r[i];
    return s;
  };
  const float eps = 1e-2f;
  for (std::size_t i = 0; i < x.size(); ++i) {
    const float keep = x[i];
    x[i] = keep + eps;
    const double lp = loss();
    x[i] = keep - eps;
    const double lm = loss();
    x[i] = keep;
    CHECK(dx[i] == Approx((lp - lm) / (2 * eps)).margin(2e-3));
  }
  for (std::size_t i = 0; i < e.size(); ++i) {
    const float keep = e[i];
    e[i] = keep + eps;
    const double lp = loss();
    e[i] = keep - eps;
    const double lm = loss();
    e[i] = keep;
    CHECK(de[i] == Approx((lp - lm) / (2 * eps)).margin(2e-3));
  }
}

TEST_CASE("per-token cross-entropy skips the ignore label", "[loss][transformer]") {
  auto ctx = ComputeContext::create(Device::cpu());
  const std::vector<float> logits = test::hashed_vector(13, 3 * 4, -2.0f, 2.0f);
  const std::vector<std::int32_t> labels{2, kIgnoreLabel, 0};
  const auto all =
      softmax_cross_entropy_forward(*ctx, logits.data(), labels.data(), 3, 4, nullptr, nullptr);
  CHECK(all.counted == 2);
  const std::vector<std::int32_t> first{2}, last{0};
  const auto a =
      softmax_cross_entropy_forward(*ctx, logits.data(), first.data(), 1, 4, nullptr, nullptr);
  const auto b =
      softmax_cross_entropy_forward(*ctx, logits.data() + 8, last.data(), 1, 4, nullptr, nullptr);
  CHECK(all.loss_sum == Approx(a.loss_sum + b.loss_sum));
  std::vector<float> d(12, 9.0f);
  softmax_cross_entropy_backward(*ctx, logits.data(), labels.data(), 3, 4, 1.0f, d.data());
  for (std::size_t j = 4; j < 8; ++j) CHECK(d[j] == 0.0f);
  const std::vector<std::int32_t> bad{2, -1, 0};
  CHECK_THROWS_WITH(
      softmax_cross_entropy_forward(*ctx, logits.data(), bad.data(), 3, 4, nullptr, nullptr),
      Catch::Contains("label -1 of batch row 1"));
}

TEST_CASE("a small GPT through Model: tied weights, per-token loss, gradients by differences",
          "[model][gradient][transformer]") {
  const std::string text =
      "input(5); wte = token_embedding(vocab=11, dim=8); wpe = position_embedding(context=6); "
      "h.0.ln_1 = layer_norm; h.0.attn = causal_self_attention(heads=2); "
      "r1 = add(wpe, h.0.attn); h.0.ln_2 = layer_norm; h.0.mlp.c_fc = linear(out=12); "
      "gelu_tanh; h.0.mlp.c_proj = linear(out=8); r2 = add(r1, h.0.mlp.c_proj); "
      "ln_f = layer_norm; lm_head = lm_head(tied=wte)";
  const ModelSpec spec = ModelSpec::parse(text);
  CHECK(ModelSpec::parse(spec.to_string()) == spec);
  ModelOptions mo;
  mo.max_batch = 2;
  mo.seed = 3;
  auto m = Model::build(spec, {5}, 11, mo);
  CHECK(m->rows_per_sample() == 5);
  CHECK(m->layer_param_range(m->layer_count() - 1).first ==
        m->layer_param_range(m->layer_count() - 1).second);  // the head owns nothing
  // Parameters of order 1 (GPT-2's initial 0.02 would make the step of the
  // differences large against the scale LayerNorm divides by).
  float* p = static_cast<float*>(m->params().ptr);
  const std::vector<float> values = test::hashed_vector(17, m->param_count(), -0.5f, 0.5f);
  std::copy(values.begin(), values.end(), p);
  const std::vector<float> x{3, 1, 4, 1, 5, 9, 2, 6, 5, 3};
  const std::vector<std::int32_t> y{1, 4, 1, 5, 9, 2, 6, 5, 3, kIgnoreLabel};
  const auto r = m->forward(x.data(), y.data(), 2, true);
  CHECK(r.counted == 9);
  m->backward(1.0f, false);
  const std::vector<float> g(static_cast<float*>(m->grads().ptr),
                             static_cast<float*>(m->grads().ptr) + m->param_count());
  // backward is the gradient of the mean over the batch's 10 rows (the
  // ignored row adds 0); forward's loss_sum is the sum over counted rows.
  auto mean_loss = [&] { return m->forward(x.data(), y.data(), 2, true).loss_sum / 10.0; };
  const float eps = 1e-2f;
  std::size_t checked = 0, bad = 0;
  for (std::size_t i = 0; i < m->param_count(); i += 2) {
    const float keep = p[i];
    p[i] = keep + eps;
    const double lp = mean_loss();
    p[i] = keep - eps;
    const double lm = mean_loss();
    p[i] = keep;
    const double numeric = (lp - lm) / (2 * eps);
    ++checked;
    if (std::abs(g[i] - numeric) > 1e-3 + 3e-2 * std::abs(numeric)) {
      ++bad;
      UNSCOPED_INFO("param " << i << ": backward " << g[i] << ", difference " << numeric);
    }
  }
  CHECK(checked > 300);
  CHECK(bad == 0);
}

// Parameters of a spec counted from its layers' descriptions, walking the
// graph's shapes: building gpt2 would allocate gigabytes for nothing.
std::size_t count_parameters(const ModelSpec& spec, const Shape& input) {
  auto ctx = ComputeContext::create(Device::cpu());
  const DropoutContext dropout{};
  std::map<std::string, Shape> shapes{{"input", input}};
  Shape previous = input;
  std::size_t n = 0;
  for (std::size_t i = 0; i < spec.layers.size(); ++i) {
    LayerSpec l = spec.layers[i];
    if (l.kind == LayerKind::lm_head) l.vocab = spec.layers[0].vocab;
    std::vector<Shape> in;
    for (const std::string& name : l.inputs) in.push_back(shapes.at(name));
    if (in.empty()) in.push_back(previous);
    const auto layer = make_layer(l, in, l.name, i, *ctx, 1, dropout);
    for (const ParamDesc& d : layer->param_descs()) n += d.shape.numel();
    previous = layer->output_shape();
    shapes[l.name] = previous;
  }
  return n;
}

TEST_CASE("gpt presets: gpt2 has 124,439,808 parameters with its head tied",
          "[preset][transformer]") {
  const auto lm = language_model_shape("gpt2");
  REQUIRE(lm);
  CHECK(lm->context == 1024);
  CHECK(lm->vocab == 50257);
  CHECK(count_parameters(graph_preset("gpt2", 1), Shape{1024}) == 124439808u);
  CHECK(count_parameters(graph_preset("gpt2-medium", 1), Shape{1024}) == 354823168u);
  ModelOptions mo;
  mo.max_batch = 1;
  auto nano = Model::build(ModelSpec::parse("gpt-nano"), {128}, 256, mo);
  // wte 256x128, wpe 128x128, 4 blocks of 2 norms (512), attention (3*128*128 + 384 +
  // 128*128 + 128) and MLP (128*512 + 512 + 512*128 + 128), ln_f 256.
  const std::size_t block =
      512 + (3 * 128 * 128 + 384 + 128 * 128 + 128) + (128 * 512 + 512 + 512 * 128 + 128);
  CHECK(nano->param_count() == 256 * 128 + 128 * 128 + 4 * block + 256);
  CHECK(nano->param_info().front().name == "wte.weight");
  CHECK(nano->param_info()[2].name == "h.0.ln_1.weight");
  CHECK(nano->param_info()[4].name == "h.0.attn.c_attn.weight");
}

TEST_CASE("gpt presets: dropout as GPT-2 (0.1) on gpt2, off on gpt-nano, :dropout=P sets it",
          "[preset][transformer][dropout]") {
  auto count_kind = [](const ModelSpec& s, LayerKind kind) {
    return std::count_if(s.layers.begin(), s.layers.end(),
                         [&](const LayerSpec& l) { return l.kind == kind; });
  };
  auto attention_p = [](const ModelSpec& s) {
    for (const LayerSpec& l : s.layers)
      if (l.kind == LayerKind::causal_self_attention) return l.p;
    return -1.0;
  };
  const ModelSpec gpt2 = graph_preset("gpt2", 1);
  // drop after the embeddings, and on each block's two residual branches.
  CHECK(count_kind(gpt2, LayerKind::dropout) == 1 + 2 * 12);
  CHECK(attention_p(gpt2) == 0.1);
  CHECK(count_kind(graph_preset("gpt2-medium", 1), LayerKind::dropout) == 1 + 2 * 24);
  const ModelSpec nano = graph_preset("gpt-nano", 256);
  CHECK(count_kind(nano, LayerKind::dropout) == 0);
  CHECK(attention_p(nano) == 0.0);
  const ModelSpec off = graph_preset("gpt2:dropout=0", 1);
  CHECK(count_kind(off, LayerKind::dropout) == 0);
  CHECK(count_parameters(off, Shape{1024}) == 124439808u);
  const ModelSpec nano_on = ModelSpec::parse("gpt-nano:dropout=0.2");
  CHECK(nano_on.preset == "gpt-nano:dropout=0.2");
  CHECK(count_kind(nano_on, LayerKind::dropout) == 1 + 2 * 4);
  CHECK(attention_p(nano_on) == Approx(0.2));
  REQUIRE(language_model_shape("gpt2:dropout=0"));
  CHECK(language_model_shape("gpt2:dropout=0")->vocab == 50257);
  CHECK_THROWS_WITH(graph_preset("gpt2:dropuot=0.1", 1), Catch::Contains("only dropout=P"));
  CHECK_THROWS_WITH(graph_preset("gpt2:dropout=1.5", 1), Catch::Contains("dropout"));
  // Evaluation with dropout on is the same model as without: gpt-nano's
  // loss with and without its dropout, in evaluation mode.
  ModelOptions mo;
  mo.max_batch = 2;
  mo.seed = 3;
  auto m0 = Model::build(ModelSpec::parse("gpt-nano"), {128}, 64, mo);
  auto m1 = Model::build(nano_on, {128}, 64, mo);
  REQUIRE(m0->param_count() == m1->param_count());
  std::vector<float> ids(2 * 128);
  std::vector<std::int32_t> labels(2 * 128);
  for (std::size_t i = 0; i < ids.size(); ++i) {
    ids[i] = static_cast<float>((i * 7) % 64);
    labels[i] = static_cast<std::int32_t>((i * 7 + 7) % 64);
  }
  const double eval0 = m0->forward(ids.data(), labels.data(), 2, false).loss_sum;
  const double eval1 = m1->forward(ids.data(), labels.data(), 2, false).loss_sum;
  CHECK(eval0 == eval1);
  const double train1 = m1->forward(ids.data(), labels.data(), 2, true).loss_sum;
  CHECK(train1 != eval1);
}
