// Finite-difference gradient checks for every layer and for the fused softmax
// cross-entropy. The scalar under test is L = sum(y * r) for a fixed random r,
// so backward gets dy = r. Central differences in float with a step of 1e-2
// (1e-3 where the layer bends), compared with a tolerance that float rounding
// of the difference quotient leaves room for.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <numeric>

#include "model/layer.h"
#include "ringtrain/model/model_spec.h"
#include "ringtrain/ops/compute_context.h"
#include "ringtrain/ops/dropout.h"
#include "ringtrain/ops/softmax_cross_entropy.h"
#include "tests/model/test_data.h"

using namespace ringtrain;

namespace {

struct LayerUnderTest {
  std::unique_ptr<ComputeContext> ctx = ComputeContext::create(Device::cpu());
  DropoutContext dropout{7, 1, 3};
  std::unique_ptr<Layer> layer;
  std::vector<float> params, grads, buffers;

  LayerUnderTest(const std::string& spec_text, const Shape& input, std::size_t max_batch) {
    const ModelSpec spec = ModelSpec::parse(spec_text);
    REQUIRE(spec.layers.size() == 1);
    layer = make_layer(spec.layers[0], input, "l", 2, *ctx, max_batch, dropout);
    std::size_t n = 0;
    for (const ParamDesc& d : layer->param_descs()) n += d.shape.numel();
    params = test::hashed_vector(99, n, -0.5f, 0.5f);
    grads.assign(n, 0.0f);
    layer->bind(params.data(), grads.data());
    for (const ParamDesc& d : layer->buffer_descs())
      buffers.insert(buffers.end(), d.shape.numel(), d.constant);
    if (!buffers.empty()) layer->bind_buffers(buffers.data());
  }

  double loss(const std::vector<float>& x, const std::vector<float>& r, std::size_t batch) {
    std::vector<float> y(batch * layer->output_shape().numel());
    layer->forward(x.data(), y.data(), batch, true);
    double s = 0;
    for (std::size_t i = 0; i < y.size(); ++i) s += static_cast<double>(y[i]) * r[i];
    return s;
  }
};

void check_close(double analytic, double numeric, double atol, double rtol,
                 const std::string& what) {
  INFO(what << ": analytic " << analytic << " vs numeric " << numeric);
  CHECK(std::abs(analytic - numeric) <= atol + rtol * std::abs(numeric));
}

// Checks dx and every parameter gradient of the layer against central
// differences at every element.
void gradient_check(const std::string& spec, const Shape& input, std::size_t batch,
                    std::vector<float> x, float eps, double atol = 2e-3, double rtol = 2e-2) {
  LayerUnderTest t(spec, input, batch + 1);
  const std::size_t out_n = batch * t.layer->output_shape().numel();
  REQUIRE(x.size() == batch * input.numel());
  const std::vector<float> r = test::hashed_vector(1234, out_n);

  std::vector<float> y(out_n), dx(x.size(), 0.0f);
  t.layer->forward(x.data(), y.data(), batch, true);
  t.layer->backward(x.data(), y.data(), r.data(), dx.data(), batch, false);
  const std::vector<float> grads = t.grads;

  for (std::size_t i = 0; i < x.size(); ++i) {
    std::vector<float> xp = x, xm = x;
    xp[i] += eps;
    xm[i] -= eps;
    const double numeric = (t.loss(xp, r, batch) - t.loss(xm, r, batch)) / (2.0 * eps);
    check_close(dx[i], numeric, atol, rtol, spec + " dx[" + std::to_string(i) + "]");
  }
  for (std::size_t i = 0; i < t.params.size(); ++i) {
    const float keep = t.params[i];
    t.params[i] = keep + eps;
    const double lp = t.loss(x, r, batch);
    t.params[i] = keep - eps;
    const double lm = t.loss(x, r, batch);
    t.params[i] = keep;
    check_close(grads[i], (lp - lm) / (2.0 * eps), atol, rtol,
                spec + " dparam[" + std::to_string(i) + "]");
  }
}

}  // namespace

TEST_CASE("linear: gradients match finite differences", "[layer][gradient]") {
  for (std::size_t batch : {1, 3, 4})
    gradient_check("linear(out=5)", Shape{7}, batch, test::hashed_vector(batch, batch * 7), 1e-2f);
}

TEST_CASE("conv2d: gradients match finite differences", "[layer][gradient]") {
  SECTION("3x3, stride 1, padding 1") {
    gradient_check("conv2d(out=3, kernel=3, stride=1, padding=1)", Shape{2, 5, 6}, 2,
                   test::hashed_vector(11, 2 * 2 * 5 * 6), 1e-2f);
  }
  SECTION("3x3, stride 2, padding 0, odd size") {
    gradient_check("conv2d(out=2, kernel=3, stride=2, padding=0)", Shape{3, 7, 7}, 2,
                   test::hashed_vector(12, 2 * 3 * 7 * 7), 1e-2f);
  }
  SECTION("2x2, stride 2, padding 2 (more padding than kernel overlap)") {
    gradient_check("conv2d(out=2, kernel=2, stride=2, padding=2)", Shape{1, 5, 4}, 3,
                   test::hashed_vector(13, 3 * 1 * 5 * 4), 1e-2f);
  }
  SECTION("1x1 direct path") {
    gradient_check("conv2d(out=4, kernel=1)", Shape{3, 3, 5}, 2,
                   test::hashed_vector(14, 2 * 3 * 3 * 5), 1e-2f);
  }
}

TEST_CASE("max_pool2d: gradients match finite differences", "[layer][gradient]") {
  // Distinct values 0.05 apart, shuffled, so no window has a near tie.
  auto distinct = [](std::size_t n, std::uint64_t salt) {
    std::vector<float> v(n);
    for (std::size_t i = 0; i < n; ++i)
      v[i] = 0.05f * static_cast<float>((i * 37 + salt) % n) - 1.0f;
    return v;
  };
  SECTION("2x2 stride 2 with a dropped odd edge") {
    gradient_check("max_pool2d(kernel=2)", Shape{2, 5, 4}, 2, distinct(2 * 2 * 5 * 4, 3), 1e-3f);
  }
  SECTION("3x3 stride 1 (overlapping windows)") {
    gradient_check("max_pool2d(kernel=3, stride=1)", Shape{1, 5, 5}, 2, distinct(2 * 25, 5), 1e-3f);
  }
}

TEST_CASE("max_pool2d with padding: gradients match finite differences", "[layer][gradient]") {
  auto distinct = [](std::size_t n, std::uint64_t salt) {
    std::vector<float> v(n);
    for (std::size_t i = 0; i < n; ++i)
      v[i] = 0.05f * static_cast<float>((i * 37 + salt) % n) - 1.0f;
    return v;
  };
  // ResNet's stem pool: 3x3, stride 2, padding 1 (padded positions never win).
  gradient_check("max_pool2d(kernel=3, stride=2, padding=1)", Shape{2, 7, 6}, 2,
                 distinct(2 * 2 * 7 * 6, 7), 1e-3f);
}

TEST_CASE("avg_pool2d: gradients match finite differences", "[layer][gradient]") {
  SECTION("2x2 stride 2") {
    gradient_check("avg_pool2d(kernel=2)", Shape{2, 5, 4}, 2, test::hashed_vector(61, 80), 1e-2f);
  }
  SECTION("3x3 stride 1 padding 1 (Inception's branch pool: zeros counted)") {
    gradient_check("avg_pool2d(kernel=3, stride=1, padding=1)", Shape{2, 4, 5}, 3,
                   test::hashed_vector(62, 3 * 40), 1e-2f);
  }
}

TEST_CASE("avg_pool2d counts padded zeros in the divisor, as PyTorch's default", "[layer]") {
  LayerUnderTest t("avg_pool2d(kernel=3, stride=1, padding=1)", Shape{1, 2, 2}, 1);
  const std::vector<float> x{1, 2, 3, 4};
  std::vector<float> y(4);
  t.layer->forward(x.data(), y.data(), 1, true);
  // every window covers the whole 2x2 input plus five padded zeros
  for (float v : y) CHECK(v == Approx(10.0 / 9.0));
}

TEST_CASE("global_avg_pool: gradients match finite differences", "[layer][gradient]") {
  gradient_check("global_avg_pool", Shape{3, 4, 5}, 2, test::hashed_vector(63, 120), 1e-2f);
  LayerUnderTest t("global_avg_pool", Shape{3, 4, 5}, 2);
  CHECK(t.layer->output_shape() == Shape{3});
}

TEST_CASE("conv2d with rectangular kernels, strides and paddings: gradients match",
          "[layer][gradient]") {
  SECTION("1x7, padding 0x3 (Inception's factorised convolution)") {
    gradient_check("conv2d(out=2, kernel=1x7, padding=0x3, bias=0)", Shape{2, 4, 9}, 2,
                   test::hashed_vector(65, 2 * 2 * 4 * 9), 1e-2f);
  }
  SECTION("1x3 and 3x1 on a 1x1 map: only the centre tap sees the input (Inception's Mixed_7c)") {
    gradient_check("conv2d(out=3, kernel=1x3, padding=0x1, bias=0)", Shape{4, 1, 1}, 3,
                   test::hashed_vector(67, 3 * 4), 1e-2f);
    gradient_check("conv2d(out=3, kernel=3x1, padding=1x0, bias=0)", Shape{4, 1, 1}, 3,
                   test::hashed_vector(68, 3 * 4), 1e-2f);
    gradient_check("conv2d(out=2, kernel=1x3, padding=0x1)", Shape{3, 2, 2}, 2,
                   test::hashed_vector(69, 2 * 12), 1e-2f);
  }
  SECTION("3x1, stride 2x1, padding 1x0") {
    gradient_check("conv2d(out=3, kernel=3x1, stride=2x1, padding=1x0)", Shape{2, 7, 5}, 2,
                   test::hashed_vector(66, 2 * 2 * 7 * 5), 1e-2f);
  }
  LayerUnderTest t("conv2d(out=2, kernel=1x7, padding=0x3)", Shape{3, 4, 9}, 1);
  CHECK(t.layer->output_shape() == Shape{2, 4, 9});
  CHECK(t.layer->param_descs()[0].shape == Shape{2, 3, 1, 7});
}

TEST_CASE("conv2d without bias: gradients match finite differences", "[layer][gradient]") {
  gradient_check("conv2d(out=3, kernel=3, stride=2, padding=1, bias=0)", Shape{2, 5, 6}, 2,
                 test::hashed_vector(64, 2 * 2 * 5 * 6), 1e-2f);
  LayerUnderTest t("conv2d(out=3, kernel=3, bias=0)", Shape{2, 5, 6}, 1);
  REQUIRE(t.layer->param_descs().size() == 1);
  CHECK(t.layer->param_descs()[0].name == "weight");
}

TEST_CASE("batch_norm: gradients match finite differences", "[layer][gradient][batch_norm]") {
  SECTION("over channels (NCHW)") {
    gradient_check("batch_norm", Shape{3, 2, 3}, 4, test::hashed_vector(71, 4 * 18, -2.0f, 2.0f),
                   1e-2f, 3e-3, 3e-2);
  }
  SECTION("over features, without affine") {
    gradient_check("batch_norm(affine=0)", Shape{5}, 6, test::hashed_vector(72, 30, -2.0f, 2.0f),
                   1e-2f, 3e-3, 3e-2);
  }
}

TEST_CASE("batch_norm: batch statistics, PyTorch's running update, evaluation mode",
          "[layer][batch_norm]") {
  LayerUnderTest t("batch_norm(momentum=0.25, eps=0.001)", Shape{2, 1, 3}, 4);
  REQUIRE(t.buffers.size() == 4);  // running_mean[2], running_var[2]
  CHECK(t.buffers == std::vector<float>{0, 0, 1, 1});
  REQUIRE(t.params.size() == 4);
  t.params = {1.5f, -0.5f, 0.25f, 2.0f};  // gamma[2], beta[2]
  t.layer->bind(t.params.data(), t.grads.data());
  const std::size_t batch = 2;
  const std::vector<float> x{1, 2, 3, -1, 0, 5, 4, 6, 8, 2, 2, 2};  // [n][c][3]
  std::vector<float> y(x.size());
  t.layer->forward(x.data(), y.data(), batch, true);
  for (std::size_t c = 0; c < 2; ++c) {
    std::vector<double> v;
    for (std::size_t n = 0; n < batch; ++n)
      for (std::size_t i = 0; i < 3; ++i) v.push_back(x[(n * 2 + c) * 3 + i]);
    const double mean = std::accumulate(v.begin(), v.end(), 0.0) / 6.0;
    double var = 0;
    for (double e : v) var += (e - mean) * (e - mean);
    var /= 6.0;
    for (std::size_t n = 0; n < batch; ++n)
      for (std::size_t i = 0; i < 3; ++i) {
        const std::size_t at = (n * 2 + c) * 3 + i;
        CHECK(y[at] ==
              Approx((x[at] - mean) / std::sqrt(var + 0.001) * t.params[c] + t.params[2 + c])
                  .epsilon(1e-5));
      }
    CHECK(t.buffers[c] == Approx(0.25 * mean));
    CHECK(t.buffers[2 + c] == Approx(0.75 + 0.25 * var * 6.0 / 5.0));  // unbiased
  }
  // Evaluation normalises with the running statistics and leaves them alone.
  const std::vector<float> kept = t.buffers;
  t.layer->forward(x.data(), y.data(), batch, false);
  CHECK(t.buffers == kept);
  for (std::size_t n = 0; n < batch; ++n)
    for (std::size_t c = 0; c < 2; ++c)
      for (std::size_t i = 0; i < 3; ++i) {
        const std::size_t at = (n * 2 + c) * 3 + i;
        CHECK(y[at] == Approx((x[at] - kept[c]) / std::sqrt(kept[2 + c] + 0.001) * t.params[c] +
                              t.params[2 + c])
                           .epsilon(1e-5));
      }
}

TEST_CASE("relu and gelu: gradients match finite differences", "[layer][gradient]") {
  gradient_check("relu", Shape{3, 4}, 3, test::away_from_zero(21, 36, 0.05f), 1e-3f);
  gradient_check("gelu", Shape{17}, 3, test::hashed_vector(22, 51, -3.0f, 3.0f), 1e-2f);
}

TEST_CASE("flatten: a view whose gradient passes through", "[layer][gradient]") {
  LayerUnderTest t("flatten", Shape{2, 3, 4}, 4);
  CHECK(t.layer->is_view());
  CHECK(t.layer->output_shape() == Shape{24});
  CHECK(t.layer->param_descs().empty());
}

TEST_CASE("dropout: gradients match finite differences and masks are reproducible",
          "[layer][dropout]") {
  gradient_check("dropout(p=0.4)", Shape{50}, 2, test::hashed_vector(31, 100), 1e-2f);

  auto ctx = ComputeContext::create(Device::cpu());
  const std::size_t n = 10007;
  const std::vector<float> x = test::hashed_vector(5, n, 0.5f, 1.5f);
  auto run = [&](std::uint64_t seed, std::uint64_t rank, std::uint64_t step, std::uint64_t layer) {
    std::vector<float> y(n);
    dropout_apply(*ctx, x.data(), y.data(), n, dropout_mask_key(seed, rank, step, layer), 0.25f);
    return y;
  };
  const auto a = run(1, 0, 5, 2);
  CHECK(a == run(1, 0, 5, 2));  // same (seed, rank, step, layer): same mask
  CHECK(a != run(1, 1, 5, 2));  // another rank
  CHECK(a != run(1, 0, 6, 2));  // another step
  CHECK(a != run(2, 0, 5, 2));  // another seed
  CHECK(a != run(1, 0, 5, 3));  // another layer
  std::size_t dropped = 0;
  for (std::size_t i = 0; i < n; ++i) {
    if (a[i] == 0.0f) {
      ++dropped;
    } else {
      CHECK(a[i] == Approx(x[i] / 0.75f));
    }
  }
  // 25% of 10007 with a binomial standard deviation of about 43.
  CHECK(dropped > 2300);
  CHECK(dropped < 2700);

  // p = 0 keeps everything unchanged (evaluation mode).
  std::vector<float> y(n);
  dropout_apply(*ctx, x.data(), y.data(), n, 123, 0.0f);
  CHECK(y == x);
  CHECK_THROWS_WITH(dropout_apply(*ctx, x.data(), y.data(), n, 1, 1.0f),
                    Catch::Contains("outside [0, 1)"));
}

TEST_CASE("softmax cross-entropy: loss, accuracy and gradient", "[loss][gradient]") {
  auto ctx = ComputeContext::create(Device::cpu());
  const std::size_t rows = 5, classes = 7;
  std::vector<float> z = test::hashed_vector(41, rows * classes, -3.0f, 3.0f);
  z[3] = 80.0f;  // a large logit must not overflow
  const std::vector<std::int32_t> labels = {0, 6, 3, 3, 1};

  auto mean_loss = [&](const std::vector<float>& logits) {
    return softmax_cross_entropy_forward(*ctx, logits.data(), labels.data(), rows, classes, nullptr,
                                         nullptr)
               .loss_sum /
           static_cast<double>(rows);
  };
  // Reference in double.
  double ref = 0;
  std::size_t ref_correct = 0;
  for (std::size_t r = 0; r < rows; ++r) {
    double m = z[r * classes];
    std::size_t arg = 0;
    for (std::size_t j = 1; j < classes; ++j)
      if (z[r * classes + j] > m) {
        m = z[r * classes + j];
        arg = j;
      }
    double s = 0;
    for (std::size_t j = 0; j < classes; ++j) s += std::exp(z[r * classes + j] - m);
    ref += std::log(s) + m - z[r * classes + static_cast<std::size_t>(labels[r])];
    ref_correct += arg == static_cast<std::size_t>(labels[r]);
  }
  const auto res =
      softmax_cross_entropy_forward(*ctx, z.data(), labels.data(), rows, classes, nullptr, nullptr);
  CHECK(res.loss_sum == Approx(ref).epsilon(1e-5));
  CHECK(res.correct == ref_correct);
  CHECK(std::isfinite(res.loss_sum));

  std::vector<float> dz(rows * classes);
  const float grad_scale = 3.0f;
  softmax_cross_entropy_backward(*ctx, z.data(), labels.data(), rows, classes, grad_scale / rows,
                                 dz.data());
  const float eps = 1e-2f;
  for (std::size_t i = 0; i < z.size(); ++i) {
    std::vector<float> zp = z, zm = z;
    zp[i] += eps;
    zm[i] -= eps;
    const double numeric = grad_scale * (mean_loss(zp) - mean_loss(zm)) / (2.0 * eps);
    check_close(dz[i], numeric, 2e-3, 2e-2, "dlogits[" + std::to_string(i) + "]");
  }
  // Each row of the gradient sums to zero (softmax minus one-hot).
  for (std::size_t r = 0; r < rows; ++r)
    CHECK(std::accumulate(dz.begin() + static_cast<long>(r * classes),
                          dz.begin() + static_cast<long>((r + 1) * classes),
                          0.0) == Approx(0.0).margin(1e-6));

  std::vector<std::int32_t> bad = labels;
  bad[2] = 7;
  CHECK_THROWS_WITH(
      softmax_cross_entropy_forward(*ctx, z.data(), bad.data(), rows, classes, nullptr, nullptr),
      Catch::Contains("label 7 of batch row 2"));
}

TEST_CASE("layers: accumulate adds, overwrite replaces, batch 0 zeroes", "[layer]") {
  for (const char* spec : {"linear(out=4)", "conv2d(out=2, kernel=3, padding=1)"}) {
    const Shape in = std::string(spec).rfind("linear", 0) == 0 ? Shape{6} : Shape{1, 3, 2};
    LayerUnderTest t(spec, in, 4);
    const std::size_t batch = 3;
    const auto x = test::hashed_vector(51, batch * in.numel());
    const auto dy = test::hashed_vector(52, batch * t.layer->output_shape().numel());
    std::vector<float> y(dy.size());
    t.layer->forward(x.data(), y.data(), batch, true);
    t.layer->backward(x.data(), y.data(), dy.data(), nullptr, batch, false);
    const auto once = t.grads;
    t.layer->backward(x.data(), y.data(), dy.data(), nullptr, batch, true);
    for (std::size_t i = 0; i < once.size(); ++i)
      CHECK(t.grads[i] == Approx(2 * once[i]).margin(1e-6));
    t.layer->backward(x.data(), y.data(), dy.data(), nullptr, batch, false);
    for (std::size_t i = 0; i < once.size(); ++i) CHECK(t.grads[i] == Approx(once[i]).margin(1e-6));
    t.layer->backward(x.data(), y.data(), dy.data(), nullptr, 0, false);
    for (float g : t.grads) CHECK(g == 0.0f);
  }
}

TEST_CASE("softmax cross-entropy with label smoothing: PyTorch's loss and its gradient",
          "[loss][gradient]") {
  auto ctx = ComputeContext::create(Device::cpu());
  const std::size_t rows = 4, classes = 5;
  const float e = 0.1f;
  const std::vector<float> z = test::hashed_vector(43, rows * classes, -3.0f, 3.0f);
  const std::vector<std::int32_t> labels = {4, 0, 2, 2};
  auto mean_loss = [&](const std::vector<float>& logits) {
    double totals[3] = {0, 0, 0};
    softmax_cross_entropy_accumulate(*ctx, logits.data(), labels.data(), rows, classes, nullptr,
                                     nullptr, totals, e);
    return totals[0] / static_cast<double>(rows);
  };
  // Reference in double: -sum_k q_k log p_k, q = (1 - e) onehot + e / K.
  double ref = 0;
  for (std::size_t r = 0; r < rows; ++r) {
    double m = -1e30, s = 0;
    for (std::size_t j = 0; j < classes; ++j) m = std::max<double>(m, z[r * classes + j]);
    for (std::size_t j = 0; j < classes; ++j) s += std::exp(z[r * classes + j] - m);
    for (std::size_t j = 0; j < classes; ++j) {
      const double logp = z[r * classes + j] - m - std::log(s);
      const double q = (j == static_cast<std::size_t>(labels[r]) ? 1.0 - e : 0.0) + e / classes;
      ref -= q * logp;
    }
  }
  CHECK(mean_loss(z) == Approx(ref / rows).epsilon(1e-5));
  std::vector<float> dz(rows * classes);
  softmax_cross_entropy_backward(*ctx, z.data(), labels.data(), rows, classes, 1.0f / rows,
                                 dz.data(), e);
  const float eps = 1e-2f;
  for (std::size_t i = 0; i < z.size(); ++i) {
    std::vector<float> zp = z, zm = z;
    zp[i] += eps;
    zm[i] -= eps;
    const double numeric = (mean_loss(zp) - mean_loss(zm)) / (2.0 * eps);
    check_close(dz[i], numeric, 2e-3, 2e-2, "smoothed dlogits[" + std::to_string(i) + "]");
  }
  // Evaluation's forward stays the plain cross-entropy.
  const double plain =
      softmax_cross_entropy_forward(*ctx, z.data(), labels.data(), rows, classes, nullptr, nullptr)
          .loss_sum;
  CHECK(plain / rows != Approx(ref / rows).epsilon(1e-4));
}

// Mixup / CutMix targets: lam onehot(a) + (1 - lam) onehot(b), smoothed as
// PyTorch's cross_entropy smooths soft targets.
TEST_CASE("softmax cross-entropy with a mixed target: two CEs, its gradient, lam 1 unchanged",
          "[loss][gradient][mixup]") {
  auto ctx = ComputeContext::create(Device::cpu());
  const std::size_t rows = 5, classes = 6;
  std::vector<float> z = test::hashed_vector(47, rows * classes, -3.0f, 3.0f);
  z[8] = 60.0f;  // a large logit must not overflow
  const std::vector<std::int32_t> a = {0, 5, 2, 2, 4}, b = {3, 1, 2, 0, 5};  // row 2: a == b
  auto totals_of = [&](const std::vector<float>& logits, float e, const LabelMix& mix) {
    std::vector<double> t(3, 0.0);
    softmax_cross_entropy_accumulate(*ctx, logits.data(), a.data(), rows, classes, nullptr, nullptr,
                                     t.data(), e, mix);
    return t;
  };
  // Reference in double: -sum_k q_k log p_k, q = (1 - e) (lam 1_a + (1 - lam) 1_b) + e / K.
  auto reference = [&](float lam, float e) {
    double ref = 0;
    for (std::size_t r = 0; r < rows; ++r) {
      double m = -1e30, s = 0;
      for (std::size_t j = 0; j < classes; ++j) m = std::max<double>(m, z[r * classes + j]);
      for (std::size_t j = 0; j < classes; ++j) s += std::exp(z[r * classes + j] - m);
      for (std::size_t j = 0; j < classes; ++j) {
        const double logp = z[r * classes + j] - m - std::log(s);
        const double t = (j == static_cast<std::size_t>(a[r]) ? lam : 0.0) +
                         (j == static_cast<std::size_t>(b[r]) ? 1.0 - lam : 0.0);
        ref -= ((1.0 - e) * t + e / classes) * logp;
      }
    }
    return ref;
  };
  for (float e : {0.0f, 0.1f}) {
    for (float lam : {0.3f, 0.5f, 0.85f}) {
      INFO("smoothing " << e << ", lam " << lam);
      const LabelMix mix{b.data(), lam};
      const double loss = totals_of(z, e, mix)[0];
      CHECK(loss == Approx(reference(lam, e)).epsilon(1e-5));
      // The two-CE formula: lam CE(a) + (1 - lam) CE(b), each with smoothing e.
      const double ce_a = totals_of(z, e, {})[0];
      double ce_b = 0;
      {
        std::vector<double> t(3, 0.0);
        softmax_cross_entropy_accumulate(*ctx, z.data(), b.data(), rows, classes, nullptr, nullptr,
                                         t.data(), e);
        ce_b = t[0];
      }
      CHECK(loss == Approx(lam * ce_a + (1.0 - lam) * ce_b).epsilon(1e-5));

      std::vector<float> dz(rows * classes);
      const float grad_scale = 2.0f;
      softmax_cross_entropy_backward(*ctx, z.data(), a.data(), rows, classes, grad_scale / rows,
                                     dz.data(), e, mix);
      const float eps = 1e-2f;
      for (std::size_t i = 0; i < z.size(); ++i) {
        std::vector<float> zp = z, zm = z;
        zp[i] += eps;
        zm[i] -= eps;
        const double numeric =
            grad_scale * (totals_of(zp, e, mix)[0] - totals_of(zm, e, mix)[0]) / (2.0 * eps * rows);
        check_close(dz[i], numeric, 2e-3, 2e-2, "mixed dlogits[" + std::to_string(i) + "]");
      }
      for (std::size_t r = 0; r < rows; ++r)  // softmax minus a distribution
        CHECK(std::accumulate(dz.begin() + static_cast<long>(r * classes),
                              dz.begin() + static_cast<long>((r + 1) * classes),
                              0.0) == Approx(0.0).margin(1e-6));
    }
    // lam 1, or no second label: today's loss and gradient, bit for bit.
    const std::vector<double> plain = totals_of(z, e, {});
    CHECK(totals_of(z, e, {b.data(), 1.0f}) == plain);
    std::vector<float> d_plain(rows * classes), d_one(rows * classes);
    softmax_cross_entropy_backward(*ctx, z.data(), a.data(), rows, classes, 0.2f, d_plain.data(),
                                   e);
    softmax_cross_entropy_backward(*ctx, z.data(), a.data(), rows, classes, 0.2f, d_one.data(), e,
                                   {b.data(), 1.0f});
    CHECK(std::memcmp(d_plain.data(), d_one.data(), d_plain.size() * sizeof(float)) == 0);
    // The same second label as the first is the plain loss too, whatever lam.
    CHECK(totals_of(z, e, {a.data(), 0.3f}) == plain);
  }
  // Accuracy counts against the label with the larger weight (the first on a tie).
  std::vector<std::int32_t> argmax(rows);
  for (std::size_t r = 0; r < rows; ++r)
    argmax[r] = static_cast<std::int32_t>(
        std::max_element(z.begin() + static_cast<long>(r * classes),
                         z.begin() + static_cast<long>((r + 1) * classes)) -
        (z.begin() + static_cast<long>(r * classes)));
  auto correct_against = [&](const std::vector<std::int32_t>& labels) {
    double c = 0;
    for (std::size_t r = 0; r < rows; ++r) c += argmax[r] == labels[r];
    return c;
  };
  CHECK(totals_of(z, 0.0f, {b.data(), 0.5f})[1] == correct_against(a));
  CHECK(totals_of(z, 0.0f, {b.data(), 0.4f})[1] == correct_against(b));
  // A second label outside the classes is named like a first one.
  std::vector<std::int32_t> bad = b;
  bad[3] = 6;
  std::vector<double> t(3, 0.0);
  CHECK_THROWS_WITH(
      softmax_cross_entropy_accumulate(*ctx, z.data(), a.data(), rows, classes, nullptr, nullptr,
                                       t.data(), 0.0f, {bad.data(), 0.5f}),
      Catch::Contains("label 6 of batch row 3"));
}
