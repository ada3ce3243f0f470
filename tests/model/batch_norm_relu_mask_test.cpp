// Fused BatchNorm + ReLU without a residual: backward given no y takes relu's
// mask from y computed again from x, the saved statistics, gamma and beta
// (ops/batch_norm_relu.h), which the plan runs so that a GPU's passes do not
// read y. It must give what reading the stored y gives, bit for bit: dx,
// dgamma and dbeta, under fp32, bf16 and fp16, in both layouts, on the
// values where a mask from anything but the stored word would differ: a
// channel whose output is exactly 0 (constant x, beta 0), one whose output
// is positive before fp16's rounding and 0 after it (gamma 1e-9), and one
// where that happens in bf16 too (gamma 1e-40: fp32 subnormals around half
// bf16's smallest positive value).
#include <catch2/catch.hpp>

#include <cmath>
#include <cstddef>
#include <limits>
#include <vector>

#include "kernels/batch_norm.cuh"
#include "kernels/batch_norm_relu.cuh"
#include "kernels/precision.cuh"
#include "kernels/storage.cuh"
#include "ringtrain/ops/batch_norm.h"
#include "ringtrain/ops/batch_norm_relu.h"
#include "ringtrain/ops/compute_context.h"
#include "ringtrain/tensor/tensor.h"
#include "tests/model/grid_values.h"
#include "tests/model/test_data.h"

using namespace ringtrain;
using namespace ringtrain::test;

namespace {

struct Backward {
  std::vector<float> dx, grads;  // grads: dgamma then dbeta
};

}  // namespace

TEST_CASE("fused batch_norm + relu: relu's mask from y computed again gives the stored y's bits",
          "[fusion]") {
  const DType p = GENERATE(DType::f32, DType::bf16, DType::f16);
  const bool nchw = GENERATE(true, false);
  INFO(dtype_name(p) << (nchw ? " nchw" : " rows"));
  auto ctx = ComputeContext::create(Device::cpu(), Tf32Mode::off, p);
  const Device dev = Device::cpu();
  // Channel 0: constant x (xhat 0, y exactly beta = 0). Channel 1: gamma
  // 1e-9, so y = 1e-9 xhat (+0), below fp16's smallest subnormal. Channel 2:
  // gamma 1e-40, about bf16's smallest subnormal (2^-133, 9.2e-41).
  const BatchNormShape s = nchw ? BatchNormShape{4, 15} : BatchNormShape{8, 1};
  const std::size_t batch = nchw ? 3 : 45, C = s.channels, n = batch * C * s.inner;
  std::vector<float> xv = hashed_vector(11, n, -2.0f, 3.0f);
  for (std::size_t i = 0; i < n; ++i)
    if ((i / s.inner) % C == 0) xv[i] = 0.75f;
  Tensor x = stored(on_grid(xv, p), p, dev, *ctx);
  Tensor dy = stored(on_grid(hashed_vector(12, n), p), p, dev, *ctx);
  Tensor y = Tensor::empty({n}, p, dev);
  std::vector<float> params = hashed_vector(13, 2 * C, 0.5f, 1.5f);
  params.at(1) = 1e-9f;
  params.at(2) = 1e-40f;
  for (std::size_t c = 0; c < 3; ++c) params.at(C + c) = 0.0f;
  std::vector<float> running(2 * C, 1.0f), mean(C), invstd(C), sums(2 * C + 1);
  const BatchNormSaved saved{mean.data(), invstd.data(), sums.data()};
  const float* gamma = params.data();
  const float* beta = params.data() + C;
  batch_norm_relu_forward(*ctx, s, x.buffer(), BufferView{nullptr, 0, p, dev}, y.buffer(), batch,
                          true, true, 1e-5f, 0.1f, gamma, beta, running.data(), running.data() + C,
                          saved);
  const std::vector<float> ys = widened_values(y, *ctx);
  // The cases are there: an exact 0 from channel 0; BatchNorm's positive
  // values that the storage rounds to 0 (channel 1 in fp16, channel 2 in
  // bf16 and fp16) beside ones it keeps (channel 2 in bf16).
  const std::vector<float> xs = widened_values(x, *ctx);
  std::size_t zeros0 = 0, lost[3] = {}, kept[3] = {};
  for (std::size_t i = 0; i < n; ++i) {
    const std::size_t c = (i / s.inner) % C;
    if (c == 0 && ys[i] == 0.0f) ++zeros0;
    const float a =
        kernels::bn_apply_element(xs[i], mean[c], invstd[c], gamma, beta, static_cast<int>(c));
    if (c < 3 && a > 0.0f) ++(ys[i] > 0.0f ? kept : lost)[c];
  }
  CHECK(zeros0 == batch * s.inner);
  CHECK(lost[1] == (p == DType::f16 ? kept[1] + lost[1] : 0));
  CHECK(lost[1] + kept[1] > 0);
  if (p != DType::f32) CHECK(lost[2] > 0);
  if (p == DType::bf16) CHECK(kept[2] > 0);

  const auto backward = [&](bool stored_y) {
    Tensor dx = Tensor::empty({n}, p, dev);
    std::vector<float> grads(2 * C, 0.0f);
    batch_norm_relu_backward(*ctx, s, x.buffer(),
                             stored_y ? y.buffer() : BufferView{nullptr, 0, p, dev}, dy.buffer(),
                             dx.buffer(), BufferView{nullptr, 0, p, dev}, batch, gamma, beta, saved,
                             grads.data(), grads.data() + C, false);
    return Backward{widened_values(dx, *ctx), grads};
  };
  const Backward read = backward(true);
  const Backward again = backward(false);
  CHECK(again.dx == read.dx);
  CHECK(again.grads == read.grads);
  // Not vacuous: the masked dy changes dbeta away from the plain sum of dy.
  const std::vector<float> dys = widened_values(dy, *ctx);
  double plain_sum = 0;
  for (std::size_t i = 0; i < n; ++i)
    if ((i / s.inner) % C == 0) plain_sum += dys[i];
  CHECK(plain_sum != 0.0);
  CHECK(read.grads[C] == 0.0f);  // channel 0: every output 0, every dy masked
}

TEST_CASE("fused batch_norm + relu: backward without y refuses a storage dtype off the precision",
          "[fusion]") {
  // fp32 buffers under bf16 precision: y is rounded twice, once to bf16's
  // grid and once as stored, which the mask from one comparison does not
  // model, so the op asks for y.
  auto ctx = ComputeContext::create(Device::cpu(), Tf32Mode::off, DType::bf16);
  const BatchNormShape s{2, 1};
  std::vector<float> x{1, 2, 3, 4}, dy{1, 1, 1, 1}, dx(4), params{1, 1, 0, 0}, mean(2), invstd(2),
      sums(5), grads(4);
  const BatchNormSaved saved{mean.data(), invstd.data(), sums.data()};
  const auto view = [](std::vector<float>& v) {
    return BufferView{v.data(), v.size(), DType::f32, Device::cpu()};
  };
  const BufferView none{nullptr, 0, DType::f32, Device::cpu()};
  CHECK_THROWS_WITH(
      batch_norm_relu_backward(*ctx, s, view(x), none, view(dy), view(dx), none, 2, params.data(),
                               params.data() + 2, saved, grads.data(), grads.data() + 2, false),
      Catch::Contains("without y") && Catch::Contains("bf16 precision"));
}

TEST_CASE("fused batch_norm + relu: the mask from x at the storage types' rounding edges",
          "[fusion]") {
  // gamma 1, beta 0, mean 0, invstd 1: BatchNorm's value is x itself, so
  // each x below is the value the forward rounds; the mask must be that of
  // the stored output (bn_relu_forward_element), at and beside the ties
  // that round to +0 and at fp16's overflow.
  const float gamma = 1.0f, beta = 0.0f;
  const auto check = [&](auto storage, DType p, float x) {
    using T = decltype(storage);
    const float stored =
        kernels::bn_relu_forward_element<T>(x, 0.0f, 1.0f, &gamma, &beta, 0, p, false, 0.0f);
    const float sign = kernels::bn_relu_output_sign(static_cast<const T*>(nullptr), 0, x, 0.0f,
                                                    1.0f, &gamma, &beta, 0);
    INFO(dtype_name(p) << " x = " << x << " stored " << stored);
    CHECK((sign > 0.0f) == (stored > 0.0f));
  };
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float sub = std::numeric_limits<float>::denorm_min();
  std::vector<float> xs{0.0f, -0.0f, sub,      -sub,     1.0f,     -1.0f, inf,
                        -inf, nan,   65504.0f, 65519.0f, 65520.0f, 1e30f};
  for (const float edge : {0x1p-25f, 0x1p-24f, 0x1p-134f, 0x1p-133f, 0x1.8p-25f, 0x1.8p-134f})
    for (const float x : {std::nextafter(edge, 0.0f), edge, std::nextafter(edge, inf)})
      xs.push_back(x);
  std::size_t zero_before = 0;  // positive x that a storage type takes to +0
  for (const float x : xs) {
    check(float{}, DType::f32, x);
    check(kernels::bf16_word{}, DType::bf16, x);
    check(kernels::f16_word{}, DType::f16, x);
    if (x > 0.0f && kernels::bn_relu_forward_element<kernels::f16_word>(
                        x, 0.0f, 1.0f, &gamma, &beta, 0, DType::f16, false, 0.0f) == 0.0f)
      ++zero_before;
  }
  CHECK(zero_before > 0);
}
