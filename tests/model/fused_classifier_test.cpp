// The fused classifier (softmax_cross_entropy_accumulate_backward, and the
// model's forward_accumulate_fused_loss, which train's step runs): the loss
// totals and the logits' gradient in one pass over the logits, against the
// two-pass path (accumulate, then backward), which evaluation keeps: the same
// bits under fp32, bf16 and fp16 logits, narrow and wide rows, with label
// smoothing, a mix's second label, ignored rows, the gradient in place over
// the logits or in its own buffer (fp32 or the storage dtype); and gpt-nano's
// gradients and loss totals over a step and an accumulated one.
#include <catch2/catch.hpp>

#include <cstring>
#include <string>
#include <vector>

#include "ringtrain/model/model.h"
#include "ringtrain/model/model_spec.h"
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

}  // namespace

TEST_CASE("fused classifier op: the two-pass loss totals and gradient, bit for bit",
          "[ops][fusion][loss]") {
  const DType p = GENERATE(DType::f32, DType::bf16, DType::f16);
  const std::size_t classes = GENERATE(1u, 7u, 64u, 600u);
  const float smoothing = GENERATE(0.0f, 0.1f);
  const bool mixed = GENERATE(false, true);
  // 0: in place over the logits; 1: its own buffer of the storage dtype; 2: fp32.
  const int target = GENERATE(0, 1, 2);
  INFO(dtype_name(p) << ", " << classes << " classes, smoothing " << smoothing
                     << (mixed ? ", mixed" : "") << ", target " << target);
  const auto ctx = ComputeContext::create(Device::cpu(), Tf32Mode::off, p);
  const std::size_t rows = 9, n = rows * classes;
  std::vector<std::int32_t> labels(rows), second(rows);
  for (std::size_t i = 0; i < rows; ++i) {
    labels[i] = static_cast<std::int32_t>((i * 5 + 2) % classes);
    second[i] = static_cast<std::int32_t>((i * 3 + 1) % classes);
  }
  labels[3] = -100;  // ignored rows: no loss, no gradient, not counted
  labels[7] = -100;
  const LabelMix mix = mixed ? LabelMix{second.data(), 0.7f} : LabelMix{};
  // Logits on the storage grid, spread wide enough that exp() matters.
  const std::vector<float> wide = test::hashed_vector(17, n, -6.0f, 6.0f);
  Tensor logits = Tensor::empty({n}, p, Device::cpu());
  convert_storage(*ctx, logits.buffer(), view_of(wide.data(), n));
  const DType g_type = target == 2 ? DType::f32 : p;
  const float scale = 3.0f / static_cast<float>(rows);
  // Two passes.
  Tensor z_a = Tensor::empty({n}, p, Device::cpu());
  z_a.copy_from(logits);
  Tensor g_a = Tensor::empty({n}, g_type, Device::cpu());
  const BufferView dz_a = target == 0 ? z_a.buffer() : g_a.buffer();
  double totals_a[3] = {0.5, 1.0, 0.0};
  softmax_cross_entropy_accumulate(*ctx, z_a.buffer(), labels.data(), rows, classes, nullptr,
                                   nullptr, totals_a, smoothing, mix);
  softmax_cross_entropy_backward(*ctx, z_a.buffer(), labels.data(), rows, classes, scale, dz_a,
                                 smoothing, mix);
  // One.
  Tensor z_b = Tensor::empty({n}, p, Device::cpu());
  z_b.copy_from(logits);
  Tensor g_b = Tensor::empty({n}, g_type, Device::cpu());
  const BufferView dz_b = target == 0 ? z_b.buffer() : g_b.buffer();
  double totals_b[3] = {0.5, 1.0, 0.0};
  softmax_cross_entropy_accumulate_backward(*ctx, z_b.buffer(), labels.data(), rows, classes,
                                            nullptr, nullptr, totals_b, scale, dz_b, smoothing,
                                            mix);
  CHECK(same_bytes(totals_a, totals_b, sizeof totals_a));
  if (classes > 1) CHECK(totals_b[0] != 0.5);  // the loss was added (one class: 0)
  CHECK(same_bytes(dz_a.ptr, dz_b.ptr, dz_a.bytes()));
  if (target != 0) CHECK(same_bytes(z_a.data(), z_b.data(), z_a.buffer().bytes()));
  // The ignored rows' gradient is zero.
  Tensor wide_grad = Tensor::empty({n}, DType::f32, Device::cpu());
  convert_storage(*ctx, wide_grad.buffer(), dz_b);
  for (std::size_t j = 0; j < classes; ++j) CHECK(wide_grad.data_as<float>()[3 * classes + j] == 0);
  // A label out of range is the two-pass path's Error.
  labels[1] = static_cast<std::int32_t>(classes);
  CHECK_THROWS_WITH(softmax_cross_entropy_accumulate_backward(
                        *ctx, z_b.buffer(), labels.data(), rows, classes, nullptr, nullptr,
                        totals_b, scale, dz_b, smoothing, mix),
                    Catch::Contains("outside [0,"));
}

TEST_CASE("fused classifier: gpt-nano's gradients and loss totals as the two-pass step",
          "[model][fusion][loss]") {
  const DType p = GENERATE(DType::f32, DType::bf16, DType::f16);
  const float smoothing = GENERATE(0.0f, 0.1f);
  INFO(dtype_name(p) << ", smoothing " << smoothing);
  const std::size_t batch = 2, context = 128, vocab = 64;
  ModelOptions o;
  o.device = Device::cpu();
  o.seed = 5;
  o.max_batch = batch;
  o.precision = p;
  o.label_smoothing = smoothing;
  const ModelSpec spec = ModelSpec::parse("gpt-nano");
  auto two = Model::build(spec, {context}, static_cast<int>(vocab), o);
  auto one = Model::build(spec, {context}, static_cast<int>(vocab), o);
  std::vector<float> ids(batch * context);
  std::vector<std::int32_t> labels(batch * context);
  const std::vector<float> u = test::hashed_vector(23, ids.size(), 0.0f, 1.0f);
  for (std::size_t i = 0; i < ids.size(); ++i) {
    ids[i] = static_cast<float>(static_cast<std::size_t>(u[i] * vocab) % vocab);
    labels[i] = i % 11 == 4 ? -100 : static_cast<std::int32_t>((i * 13 + 5) % vocab);
  }
  const float scale = p == DType::f16 ? 512.0f : 0.25f;
  for (int step = 0; step < 2; ++step) {
    INFO("step " << step);
    two->forward_accumulate(ids.data(), labels.data(), batch, true);
    two->backward(scale, step > 0);
    one->forward_accumulate_fused_loss(ids.data(), labels.data(), batch, scale);
    one->backward(scale, step > 0);
    CHECK(same_bytes(two->grads().ptr, one->grads().ptr, two->grads().bytes()));
  }
  const Model::LossResult a = two->take_loss_totals(), b = one->take_loss_totals();
  CHECK(a.loss_sum == b.loss_sum);
  CHECK(a.correct == b.correct);
  // The backward of a fused forward takes its scale.
  one->forward_accumulate_fused_loss(ids.data(), labels.data(), batch, scale);
  CHECK_THROWS_WITH(one->backward(2.0f * scale, false), Catch::Contains("grad_scale"));
}
