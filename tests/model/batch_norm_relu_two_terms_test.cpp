// Fused BatchNorm + (add +) ReLU's backward given its output's gradient in
// two terms (dy and dy_addend: a ResNet block's output, read by the next
// block's convolution and its fused add), which the model's plan passes where
// a pass summed them first: the same bits as summing them with
// sum_two_stored and passing the sum, for dx, the residual's gradient, dgamma
// and dbeta, in fp32, bf16 and fp16, both layouts, with and without a
// residual (and without y, relu's mask from x again).
#include <catch2/catch.hpp>

#include <cstddef>
#include <vector>

#include "ringtrain/ops/batch_norm.h"
#include "ringtrain/ops/batch_norm_relu.h"
#include "ringtrain/ops/compute_context.h"
#include "ringtrain/ops/merge.h"
#include "ringtrain/tensor/tensor.h"
#include "tests/model/grid_values.h"
#include "tests/model/test_data.h"

using namespace ringtrain;
using namespace ringtrain::test;

TEST_CASE("fused batch_norm + relu: dy in two terms gives the bits of their stored sum",
          "[fusion]") {
  const DType p = GENERATE(DType::f32, DType::bf16, DType::f16);
  const bool nchw = GENERATE(true, false);
  const bool residual = GENERATE(true, false);
  INFO(dtype_name(p) << (nchw ? " nchw" : " rows") << (residual ? " residual" : ""));
  auto ctx = ComputeContext::create(Device::cpu(), Tf32Mode::off, p);
  const Device dev = Device::cpu();
  const BatchNormShape s = nchw ? BatchNormShape{5, 12} : BatchNormShape{16, 1};
  const std::size_t batch = nchw ? 3 : 29, C = s.channels, n = batch * C * s.inner;
  const BufferView none{nullptr, 0, p, dev};
  Tensor x = stored(on_grid(hashed_vector(21, n, -2.0f, 3.0f), p), p, dev, *ctx);
  Tensor r = stored(on_grid(hashed_vector(22, n, -1.0f, 1.0f), p), p, dev, *ctx);
  // The terms: the second larger in places, so that their sum rounds.
  Tensor dy = stored(on_grid(hashed_vector(23, n), p), p, dev, *ctx);
  Tensor addend = stored(on_grid(hashed_vector(24, n, -3.0f, 3.0f), p), p, dev, *ctx);
  Tensor y = Tensor::empty({n}, p, dev);
  const std::vector<float> params = hashed_vector(25, 2 * C, 0.5f, 1.5f);
  std::vector<float> running(2 * C, 1.0f), mean(C), invstd(C), sums(2 * C + 1);
  const BatchNormSaved saved{mean.data(), invstd.data(), sums.data()};
  const float* gamma = params.data();
  const float* beta = params.data() + C;
  batch_norm_relu_forward(*ctx, s, x.buffer(), residual ? r.buffer() : none, y.buffer(), batch,
                          true, true, 1e-5f, 0.1f, gamma, beta, running.data(), running.data() + C,
                          saved);
  struct Result {
    std::vector<float> dx, d_residual, grads;
  };
  const auto backward = [&](BufferView d, BufferView add, bool with_y) {
    Tensor dx = Tensor::empty({n}, p, dev), dr = Tensor::empty({n}, p, dev);
    std::vector<float> grads(2 * C, 0.0f);
    batch_norm_relu_backward(*ctx, s, x.buffer(), with_y ? y.buffer() : none, d, dx.buffer(),
                             residual ? dr.buffer() : none, batch, gamma, beta, saved, grads.data(),
                             grads.data() + C, false, nullptr, add);
    return Result{widened_values(dx, *ctx),
                  residual ? widened_values(dr, *ctx) : std::vector<float>{}, grads};
  };
  Tensor sum = Tensor::empty({n}, p, dev);
  sum_two_stored(*ctx, sum.buffer(), dy.buffer(), addend.buffer(), 1.0f);
  for (const bool with_y : residual ? std::vector<bool>{true} : std::vector<bool>{true, false}) {
    INFO((with_y ? "y read" : "y again from x"));
    const Result want = backward(sum.buffer(), none, with_y);
    const Result got = backward(dy.buffer(), addend.buffer(), with_y);
    CHECK(got.dx == want.dx);
    CHECK(got.d_residual == want.d_residual);
    CHECK(got.grads == want.grads);
    // Not vacuous: dy alone gives other numbers.
    CHECK(backward(dy.buffer(), none, with_y).grads != want.grads);
  }
}

TEST_CASE("fused batch_norm + relu: a second term of another dtype or fewer elements is refused",
          "[fusion]") {
  auto ctx = ComputeContext::create(Device::cpu(), Tf32Mode::off, DType::bf16);
  const Device dev = Device::cpu();
  const BatchNormShape s{4, 1};
  const std::size_t batch = 6, n = batch * 4;
  const BufferView none{nullptr, 0, DType::bf16, dev};
  Tensor x = Tensor::zeros({n}, DType::bf16, dev), dy = Tensor::zeros({n}, DType::bf16, dev);
  Tensor dx = Tensor::zeros({n}, DType::bf16, dev);
  Tensor wide = Tensor::zeros({n}, DType::f32, dev),
         short_term = Tensor::zeros({n - 1}, DType::bf16, dev);
  std::vector<float> params(8, 1.0f), mean(4), invstd(4, 1.0f), sums(9), grads(8);
  const BatchNormSaved saved{mean.data(), invstd.data(), sums.data()};
  for (const Tensor* bad : {&wide, &short_term})
    CHECK_THROWS_WITH(
        batch_norm_relu_backward(*ctx, s, x.buffer(), none, dy.buffer(), dx.buffer(), none, batch,
                                 params.data(), params.data() + 4, saved, grads.data(),
                                 grads.data() + 4, false, nullptr, bad->buffer()),
        Catch::Contains("second gradient term"));
}
