// The step's buffers placed by their lives (model/buffer_lifetimes.h): the
// packer never lets two blocks live at once share a byte, and reuses what is
// dead; a model planned that way trains to the same bits as one whose every
// buffer is apart (RINGTRAIN_BUFFER_REUSE=off) and as one whose blocks turn
// to NaN as their lives end (poison), in less memory, and refuses a second
// backward after one forward (its activations hold gradients by then).
#include <catch2/catch.hpp>

#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "model/buffer_lifetimes.h"
#include "ringtrain/model/model.h"
#include "ringtrain/model/model_spec.h"
#include "tests/model/plan_bits.h"
#include "tests/model/test_data.h"

using namespace ringtrain;
using namespace ringtrain::test;

TEST_CASE("pack_live_blocks: blocks live at once never overlap, dead ones are reused") {
  // Two lives that do not meet share offset 0; a third that meets both sits
  // above the larger of them.
  const BlockLayout small = pack_live_blocks({{100, 0, 3}, {300, 4, 9}, {50, 3, 4}}, 64);
  CHECK(small.offsets[0] == 0);
  CHECK(small.offsets[1] == 0);
  CHECK(small.offsets[2] == 320);  // above the 300 (aligned to 320) live at 4
  CHECK(small.bytes == 384);
  CHECK_THROWS_WITH(pack_live_blocks({{8, 5, 4}}, 64), Catch::Contains("dies (4) before"));
  // Many blocks of hashed sizes and lives.
  const std::vector<float> u = hashed_vector(3, 3 * 400, 0.0f, 1.0f);
  std::vector<LiveBlock> blocks;
  std::size_t sum = 0;
  for (std::size_t b = 0; b < 400; ++b) {
    const auto birth = static_cast<std::size_t>(u[3 * b] * 100);
    const auto life = static_cast<std::size_t>(u[3 * b + 1] * 30);
    const auto bytes = static_cast<std::size_t>(u[3 * b + 2] * 5000) + 1;
    blocks.push_back({bytes, birth, birth + life});
    sum += (bytes + 255) / 256 * 256;
  }
  const BlockLayout layout = pack_live_blocks(blocks, 256);
  std::size_t overlaps = 0, misaligned = 0;
  for (std::size_t a = 0; a < blocks.size(); ++a) {
    misaligned += layout.offsets[a] % 256 != 0;
    CHECK(layout.offsets[a] + blocks[a].bytes <= layout.bytes);
    for (std::size_t b = a + 1; b < blocks.size(); ++b) {
      const bool live_together =
          blocks[a].birth <= blocks[b].death && blocks[b].birth <= blocks[a].death;
      const bool share = layout.offsets[a] < layout.offsets[b] + blocks[b].bytes &&
                         layout.offsets[b] < layout.offsets[a] + blocks[a].bytes;
      overlaps += live_together && share;
    }
  }
  CHECK(overlaps == 0);
  CHECK(misaligned == 0);
  CHECK(layout.bytes < sum / 2);  // lives of at most 30 in 130: most bytes reused
  CHECK(pack_live_blocks(blocks, 256).offsets == layout.offsets);  // deterministic
}

namespace {

// mode: RINGTRAIN_BUFFER_REUSE's value ("" for the default).
std::unique_ptr<Model> build(const std::string& spec, const std::vector<std::size_t>& input,
                             int classes, DType precision, const char* mode,
                             bool gelu_fused = false,
                             LayoutChoice layout = LayoutChoice::automatic) {
  if (*mode == '\0')
    unsetenv("RINGTRAIN_BUFFER_REUSE");
  else
    setenv("RINGTRAIN_BUFFER_REUSE", mode, 1);
  ModelOptions o;
  o.device = Device::cpu();
  o.seed = 13;
  o.max_batch = 4;
  o.precision = precision;
  if (gelu_fused) o.fuse_linear_gelu = ModelOptions::LinearGelu::on;
  o.layout = layout;
  auto m = Model::build(ModelSpec::parse(spec), input, classes, o);
  unsetenv("RINGTRAIN_BUFFER_REUSE");
  return m;
}

}  // namespace

TEST_CASE("a plan of reused buffers trains to the bits of one whose buffers are apart",
          "[model][memory]") {
  struct Case {
    std::string spec;
    std::vector<std::size_t> input;
    int classes;
    bool gelu_fused;
    LayoutChoice layout = LayoutChoice::automatic;
  };
  // Residual adds (resnet20), concatenations (inception3), the fused residual
  // + LayerNorm and attention (gpt-nano), and the linear + gelu fused both
  // ways, whose backward keeps the pre-activation's gradient longer; resnet20
  // channels-last too, whose transposed input lives until it is narrowed.
  const Case c = GENERATE(Case{"resnet20", {3, 16, 16}, 10, false},
                          Case{"resnet20", {3, 16, 16}, 10, false, LayoutChoice::nhwc},
                          Case{"gpt-nano", {128}, 61, false}, Case{"gpt-nano", {128}, 61, true},
                          Case{"inception3", {3, 75, 75}, 7, false});
  const DType p = GENERATE(DType::f32, DType::bf16);
  CAPTURE(c.spec, c.gelu_fused, c.layout == LayoutChoice::nhwc, dtype_name(p));
  auto reused = build(c.spec, c.input, c.classes, p, "", c.gelu_fused, c.layout);
  auto apart = build(c.spec, c.input, c.classes, p, "off", c.gelu_fused, c.layout);
  // Every block NaN once its life ends: a read past it shows, whatever
  // happens to share its bytes in this plan.
  auto poisoned = build(c.spec, c.input, c.classes, p, "poison", c.gelu_fused, c.layout);
  CHECK(reused->activation_bytes_per_sample() < apart->activation_bytes_per_sample());
  const std::size_t batch = 3;  // below max_batch: the buffers' fronts
  std::size_t per_sample = 1;
  for (std::size_t d : c.input) per_sample *= d;
  const bool tokens = c.input.size() == 1;
  const std::size_t rows = batch * reused->rows_per_sample();
  std::vector<float> x = hashed_vector(5, batch * per_sample);
  if (tokens)
    for (std::size_t i = 0; i < x.size(); ++i)
      x[i] = static_cast<float>((i * 7 + 3) % static_cast<std::size_t>(c.classes));
  std::vector<std::int32_t> labels(rows);
  for (std::size_t i = 0; i < rows; ++i)
    labels[i] = static_cast<std::int32_t>((i * 5 + 1) % static_cast<std::size_t>(c.classes));
  for (int step = 0; step < 3; ++step) {
    CAPTURE(step);
    for (Model* m : {reused.get(), apart.get(), poisoned.get()}) {
      if (step == 1) {
        m->forward_accumulate_fused_loss(x.data(), labels.data(), batch, 0.5f);
        m->backward(0.5f, false);
      } else {
        m->forward_accumulate(x.data(), labels.data(), batch, true);
        m->backward(0.5f, false);
        m->forward_accumulate(x.data(), labels.data(), batch, true);  // accumulated
        m->backward(0.5f, true);
      }
    }
    const double loss = apart->take_loss_totals().loss_sum;
    CHECK(reused->take_loss_totals().loss_sum == loss);
    CHECK(poisoned->take_loss_totals().loss_sum == loss);
    check_same_logits_and_grads(*reused, *apart, rows * static_cast<std::size_t>(c.classes));
    check_same_logits_and_grads(*poisoned, *apart, rows * static_cast<std::size_t>(c.classes));
    for (Model* m : {reused.get(), apart.get(), poisoned.get()}) {
      auto* w = static_cast<float*>(m->params().ptr);
      const auto* g = static_cast<const float*>(m->grads().ptr);
      for (std::size_t i = 0; i < m->param_count(); ++i) w[i] -= 0.05f * g[i];
    }
  }
  CHECK(differing(bits_of(reused->params()), bits_of(apart->params())) == 0);
  CHECK(differing(bits_of(poisoned->params()), bits_of(apart->params())) == 0);
  // Evaluation after training reads fresh activations.
  const Model::LossResult ea = reused->forward(x.data(), labels.data(), batch, false);
  const Model::LossResult eb = apart->forward(x.data(), labels.data(), batch, false);
  const Model::LossResult ec = poisoned->forward(x.data(), labels.data(), batch, false);
  CHECK(ea.loss_sum == eb.loss_sum);
  CHECK(ea.correct == eb.correct);
  CHECK(ec.loss_sum == eb.loss_sum);
  CHECK(ec.correct == eb.correct);
}

TEST_CASE("a second backward after one forward is refused") {
  auto m = build("resnet20", {3, 8, 8}, 10, DType::f32, "");
  const std::vector<float> x = hashed_vector(6, 2 * 3 * 8 * 8);
  const std::vector<std::int32_t> labels{1, 2};
  m->forward_accumulate(x.data(), labels.data(), 2, true);
  m->backward(1.0f, false);
  CHECK_THROWS_WITH(m->backward(1.0f, true), Catch::Contains("backward called twice"));
  m->forward_accumulate(x.data(), labels.data(), 2, true);
  CHECK_NOTHROW(m->backward(1.0f, true));
}

TEST_CASE("logits that a view of the last node holds are still there after backward") {
  // The conv's [5, 1, 1] output is the logits, flatten a view of it.
  auto m = build(
      "input(3, 4, 4); conv2d(out=8, kernel=3, padding=1); relu; "
      "conv2d(out=5, kernel=4); flatten",
      {3, 4, 4}, 5, DType::f32, "poison");
  const std::vector<float> x = hashed_vector(8, 2 * 3 * 4 * 4);
  const std::vector<std::int32_t> labels{1, 4};
  m->forward_accumulate(x.data(), labels.data(), 2, true);
  std::vector<float> before(10), after(10);
  m->copy_logits(0, before.data(), before.size());
  m->backward(1.0f, false);
  m->copy_logits(0, after.data(), after.size());
  CHECK(differing(bits_of(before.data(), 10), bits_of(after.data(), 10)) == 0);
}
