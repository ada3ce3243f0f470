// The tied head's padded logits (rows of the vocabulary padded to a multiple
// of 64 under bf16/fp16, as llm.c keeps them): the loss over padded rows
// against the same logits unpadded, whatever the padding holds, with the
// gradient's padding written 0; and a gpt-nano of vocabulary 300 (rows of
// 320) against the same model whose head is not the last node (a dropout of
// p = 0 after it, so its logits stay unpadded: the plan as it was before the
// padding), bit for bit: logits, copy_logits at any offset, predictions,
// losses, gradients and a few training steps.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/storage.cuh"
#include "ringtrain/model/model.h"
#include "ringtrain/model/model_spec.h"
#include "ringtrain/model/presets.h"
#include "ringtrain/ops/compute_context.h"
#include "ringtrain/ops/precision.h"
#include "ringtrain/ops/softmax_cross_entropy.h"
#include "ringtrain/tensor/tensor.h"
#include "tests/model/test_data.h"

using namespace ringtrain;

namespace {

bool same_bytes(const void* a, const void* b, std::size_t n) {
  return std::memcmp(a, b, n) == 0;
}

// Element i of a CPU view of a storage dtype, widened (exact).
float element(const BufferView& v, std::size_t i) {
  return kernels::with_storage(v.dtype, [&](auto t) {
    using T = decltype(t);
    return kernels::load(static_cast<const T*>(v.ptr), i);
  });
}

}  // namespace

TEST_CASE("padded classifier: the unpadded loss and gradient, padding ignored and zeroed",
          "[ops][loss][padded]") {
  const DType p = GENERATE(DType::f32, DType::bf16, DType::f16);
  const std::size_t classes = GENERATE(1u, 7u, 300u);
  const float smoothing = GENERATE(0.0f, 0.1f);
  const bool mixed = GENERATE(false, true);
  const bool in_place = GENERATE(true, false);
  const std::size_t stride = (classes / 64 + 1) * 64;
  INFO(dtype_name(p) << ", " << classes << " classes " << stride << " apart, smoothing "
                     << smoothing << (mixed ? ", mixed" : "") << (in_place ? ", in place" : ""));
  const auto ctx = ComputeContext::create(Device::cpu(), Tf32Mode::off, p);
  const std::size_t rows = 9;
  std::vector<std::int32_t> labels(rows), second(rows);
  for (std::size_t i = 0; i < rows; ++i) {
    labels[i] = static_cast<std::int32_t>((i * 5 + 2) % classes);
    second[i] = static_cast<std::int32_t>((i * 3 + 1) % classes);
  }
  labels[4] = -100;
  const LabelMix mix = mixed ? LabelMix{second.data(), 0.7f} : LabelMix{};
  const std::vector<float> compact = test::hashed_vector(31, rows * classes, -6.0f, 6.0f);
  Tensor zc = Tensor::empty({rows * classes}, p, Device::cpu());
  convert_storage(*ctx, zc.buffer(), view_of(compact.data(), compact.size()));
  const float scale = 3.0f / static_cast<float>(rows);
  // The unpadded reference: the two-pass loss (evaluation's) and gradient.
  double ref_totals[3] = {0, 0, 0};
  Tensor gc = Tensor::empty({rows * classes}, p, Device::cpu());
  softmax_cross_entropy_accumulate(*ctx, zc.buffer(), labels.data(), rows, classes, nullptr,
                                   nullptr, ref_totals, smoothing, mix);
  softmax_cross_entropy_backward(*ctx, zc.buffer(), labels.data(), rows, classes, scale,
                                 gc.buffer(), smoothing, mix);
  const SoftmaxCrossEntropyResult ref_eval = softmax_cross_entropy_forward(
      *ctx, zc.buffer(), labels.data(), rows, classes, nullptr, nullptr);
  // Padding of garbage that would win every row (and overflow fp16) if read.
  for (const float garbage : {1000.0f, -3.0e4f, 0.0f}) {
    INFO("padding " << garbage);
    std::vector<float> padded(rows * stride, garbage);
    for (std::size_t r = 0; r < rows; ++r)
      for (std::size_t j = 0; j < classes; ++j) padded[r * stride + j] = compact[r * classes + j];
    for (const bool fused : {false, true}) {
      INFO((fused ? "fused" : "two passes"));
      Tensor z = Tensor::empty({rows * stride}, p, Device::cpu());
      convert_storage(*ctx, z.buffer(), view_of(padded.data(), padded.size()));
      Tensor own = Tensor::empty({rows * stride}, p, Device::cpu());
      std::memset(own.data(), 0x7b, own.buffer().bytes());  // no zeros to start from
      const BufferView dz = in_place ? z.buffer() : own.buffer();
      double totals[3] = {0, 0, 0};
      const SoftmaxCrossEntropyResult eval = softmax_cross_entropy_forward(
          *ctx, z.buffer(), labels.data(), rows, classes, stride, nullptr, nullptr);
      CHECK(eval.loss_sum == ref_eval.loss_sum);
      CHECK(eval.correct == ref_eval.correct);
      CHECK(eval.counted == ref_eval.counted);
      if (fused) {
        softmax_cross_entropy_accumulate_backward(*ctx, z.buffer(), labels.data(), rows, classes,
                                                  stride, nullptr, nullptr, totals, scale, dz,
                                                  smoothing, mix);
      } else {
        softmax_cross_entropy_accumulate(*ctx, z.buffer(), labels.data(), rows, classes, stride,
                                         nullptr, nullptr, totals, smoothing, mix);
        softmax_cross_entropy_backward(*ctx, z.buffer(), labels.data(), rows, classes, stride,
                                       scale, dz, smoothing, mix);
      }
      CHECK(totals[0] == ref_totals[0]);
      CHECK(totals[1] == ref_totals[1]);
      CHECK(totals[2] == ref_totals[2]);
      const std::size_t e = dtype_size(p);
      std::size_t differ = 0, padding_nonzero = 0;
      for (std::size_t r = 0; r < rows; ++r) {
        differ += !same_bytes(static_cast<const char*>(dz.ptr) + r * stride * e,
                              static_cast<const char*>(gc.data()) + r * classes * e, classes * e);
        for (std::size_t j = classes; j < stride; ++j) {
          const float v = element(dz, r * stride + j);
          padding_nonzero += v != 0.0f || std::signbit(v);
        }
      }
      CHECK(differ == 0);
      CHECK(padding_nonzero == 0);
    }
  }
}

TEST_CASE("padded classifier: a row stride narrower than the classes, or too few logits",
          "[ops][loss][padded]") {
  const auto ctx = ComputeContext::create(Device::cpu());
  std::vector<float> z(2 * 8, 0.0f);
  const std::vector<std::int32_t> labels{1, 2};
  CHECK_THROWS_WITH(softmax_cross_entropy_forward(*ctx, view_of(z.data(), z.size()), labels.data(),
                                                  2, 8, 7, nullptr, nullptr),
                    Catch::Contains("row stride of 7 is narrower than the 8 classes"));
  CHECK_THROWS_WITH(softmax_cross_entropy_forward(*ctx, view_of(z.data(), z.size()), labels.data(),
                                                  2, 8, 9, nullptr, nullptr),
                    Catch::Contains("16 logits for 2 rows of 8 classes 9 apart"));
  // The last row's padding is read by no one but written in the gradient:
  // 17 values are logits enough, not gradient enough.
  std::vector<float> z17(17, 0.0f), dz17(17, 0.0f);
  CHECK_THROWS_WITH(
      softmax_cross_entropy_backward(*ctx, view_of(z17.data(), z17.size()), labels.data(), 2, 8, 9,
                                     1.0f, view_of(dz17.data(), dz17.size())),
      Catch::Contains("17 gradient values for 2 rows of 8 classes 9 apart"));
}

namespace {

// gpt-nano of `vocab` classes, and the same graph with a dropout of p = 0
// after its head (the same parameters: the dropout has none): its head is not
// the last node, so its logits keep rows of the vocabulary.
ModelSpec nano(std::size_t vocab, bool head_last) {
  ModelSpec spec = graph_preset("gpt-nano", vocab);
  if (head_last) return spec;
  LayerSpec keep{LayerKind::dropout};
  keep.p = 0.0;
  spec.layers.push_back(keep);
  spec.origins.clear();
  spec.preset.clear();  // the graph as written, not the preset's again
  return spec;
}

}  // namespace

TEST_CASE("padded logits: gpt-nano of vocabulary 300 as with unpadded logits, bit for bit",
          "[model][loss][padded]") {
  const DType p = GENERATE(DType::f32, DType::bf16, DType::f16);
  INFO(dtype_name(p));
  const std::size_t batch = 2, context = 128, vocab = 300;
  ModelOptions o;
  o.device = Device::cpu();
  o.seed = 9;
  o.max_batch = batch;
  o.precision = p;
  auto padded = Model::build(nano(vocab, true), {context}, static_cast<int>(vocab), o);
  auto plain = Model::build(nano(vocab, false), {context}, static_cast<int>(vocab), o);
  const std::size_t stride = p == DType::f32 ? vocab : 320;
  CHECK(padded->logits_row_stride() == stride);
  CHECK(plain->logits_row_stride() == vocab);
  REQUIRE(padded->param_count() == plain->param_count());
  REQUIRE(same_bytes(padded->params().ptr, plain->params().ptr, padded->params().bytes()));
  std::vector<float> ids(batch * context);
  std::vector<std::int32_t> labels(batch * context);
  const std::vector<float> u = test::hashed_vector(41, ids.size(), 0.0f, 1.0f);
  for (std::size_t i = 0; i < ids.size(); ++i) {
    ids[i] = static_cast<float>(static_cast<std::size_t>(u[i] * vocab) % vocab);
    labels[i] = i % 13 == 6 ? -100 : static_cast<std::int32_t>((i * 17 + 3) % vocab);
  }
  const std::size_t rows = batch * context;
  const float scale = p == DType::f16 ? 256.0f : 0.5f;
  for (int step = 0; step < 3; ++step) {
    INFO("step " << step);
    // Evaluation: the loss, the logits (every one, and a row's tail from
    // within it, as generate reads the last position), the predictions.
    const Model::LossResult ea = padded->forward(ids.data(), labels.data(), batch, false);
    const Model::LossResult eb = plain->forward(ids.data(), labels.data(), batch, false);
    CHECK(ea.loss_sum == eb.loss_sum);
    CHECK(ea.correct == eb.correct);
    CHECK(ea.counted == eb.counted);
    CHECK(padded->logits().count == rows * stride);
    std::vector<float> la(rows * vocab), lb(rows * vocab);
    padded->copy_logits(0, la.data(), la.size());
    plain->copy_logits(0, lb.data(), lb.size());
    CHECK(same_bytes(la.data(), lb.data(), la.size() * sizeof(float)));
    std::size_t predictions_differ = 0;
    for (std::size_t r = 0; r < rows; ++r) {
      const auto row_a = la.begin() + static_cast<std::ptrdiff_t>(r * vocab);
      const auto row_b = lb.begin() + static_cast<std::ptrdiff_t>(r * vocab);
      predictions_differ +=
          std::max_element(row_a, row_a + static_cast<std::ptrdiff_t>(vocab)) - row_a !=
          std::max_element(row_b, row_b + static_cast<std::ptrdiff_t>(vocab)) - row_b;
    }
    CHECK(predictions_differ == 0);
    const std::size_t first = (context - 1) * vocab + 17, count = vocab + 40;
    std::vector<float> ta(count), tb(count);
    padded->copy_logits(first, ta.data(), count);
    plain->copy_logits(first, tb.data(), count);
    CHECK(same_bytes(ta.data(), tb.data(), count * sizeof(float)));
    CHECK_THROWS_WITH(padded->copy_logits(rows * vocab - 3, ta.data(), 4),
                      Catch::Contains("copy_logits"));
    // The padding after a forward holds no logit: zeros, as the model keeps it.
    const BufferView z = padded->logits();
    std::size_t padding_nonzero = 0;
    for (std::size_t r = 0; r < rows; ++r)
      for (std::size_t j = vocab; j < stride; ++j)
        padding_nonzero += element(z, r * stride + j) != 0;
    CHECK(padding_nonzero == 0);
    // A training step, the fused classifier's on even steps and the two
    // passes' on odd ones, then the same plain SGD update on both.
    if (step % 2 == 0) {
      padded->forward_accumulate_fused_loss(ids.data(), labels.data(), batch, scale);
      plain->forward_accumulate_fused_loss(ids.data(), labels.data(), batch, scale);
    } else {
      padded->forward_accumulate(ids.data(), labels.data(), batch, true);
      plain->forward_accumulate(ids.data(), labels.data(), batch, true);
    }
    padded->backward(scale, false);
    plain->backward(scale, false);
    CHECK(same_bytes(padded->grads().ptr, plain->grads().ptr, padded->grads().bytes()));
    const Model::LossResult ta_loss = padded->take_loss_totals();
    const Model::LossResult tb_loss = plain->take_loss_totals();
    CHECK(ta_loss.loss_sum == tb_loss.loss_sum);
    CHECK(ta_loss.correct == tb_loss.correct);
    for (Model* m : {padded.get(), plain.get()}) {
      float* w = static_cast<float*>(m->params().ptr);
      const float* g = static_cast<const float*>(m->grads().ptr);
      for (std::size_t i = 0; i < m->param_count(); ++i) w[i] -= 0.05f / scale * g[i];
    }
  }
  CHECK(same_bytes(padded->params().ptr, plain->params().ptr, padded->params().bytes()));
}
