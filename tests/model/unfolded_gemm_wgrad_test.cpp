// ops/unfolded_gemm_wgrad.h on the CPU: which shapes the plan takes, how it
// chunks the batch, the unfolded rows (kernels/unfolded_taps.cuh, the
// function the GPU's kernel runs, by plain and by FastDivide division), and
// the twin of the GPU's sequence against a direct double-precision sum for
// strided convolutions (a ResNet stem, 1x1 and 3x3 downsamplings, an uneven
// stride, one image per chunk) and stride-1 ones (VGG's first convolution
// on 3 channels, channels that are no multiple of 8, a wide padding).
#include <catch2/catch.hpp>

#include <cmath>
#include <string>
#include <vector>

#include "kernels/unfolded_taps.cuh"
#include "ops/unfolded_gemm_wgrad.h"
#include "tests/model/grid_values.h"
#include "tests/model/wgrad_reference.h"

using namespace ringtrain;
using detail::ConvGraphShape;

namespace {

ConvGraphShape shape(std::size_t n, std::size_t c, std::size_t h, std::size_t w, std::size_t k,
                     std::size_t r, std::size_t s, std::size_t pad, std::size_t stride_h,
                     std::size_t stride_w) {
  return test::nhwc_conv(n, c, h, w, k, r, s, pad, pad, stride_h, stride_w);
}

}  // namespace

TEST_CASE("unfolded weight gradient: the shapes it takes, its chunks", "[unfolded_wgrad]") {
  std::string why;
  const ConvGraphShape stem = shape(5, 3, 11, 11, 8, 7, 7, 3, 2, 2);
  const auto plan = detail::plan_unfolded_wgrad(stem, std::size_t{1} << 30, &why);
  REQUIRE(plan.has_value());
  CHECK(plan->unfolded.ld == 152);  // 7 * 7 * 3 = 147, rounded up to 8
  CHECK(plan->images_per_chunk == 5);
  CHECK(plan->chunks == 1);
  // dW's rows of 147 floats staged at a pitch of 148, after the rows (256-aligned).
  CHECK(plan->stages_dw());
  CHECK(plan->dw_ld == 148);
  CHECK(plan->dw_offset == (5 * 6 * 6 * 152 * 2 + 255) / 256 * 256);
  CHECK(plan->dw_offset % 256 == 0);
  CHECK(plan->workspace_bytes == plan->dw_offset + 8 * 148 * 4);
  // Room for two images' rows: chunks of 2, 2 and 1 (the cap is the rows'; dW's staging is apart).
  const auto parts = detail::plan_unfolded_wgrad(stem, 2 * 6 * 6 * 152 * 2 + 100, &why);
  REQUIRE(parts.has_value());
  CHECK(parts->images_per_chunk == 2);
  CHECK(parts->chunks == 3);
  // The staging after a chunk's rows, never over them.
  CHECK(parts->dw_offset >= 2 * 6 * 6 * 152 * 2);
  CHECK(parts->dw_offset % 256 == 0);
  // Room for 4 of 5: two chunks of 3 and 2, not 4 and 1.
  const auto even = detail::plan_unfolded_wgrad(stem, 4 * 6 * 6 * 152 * 2, &why);
  REQUIRE(even.has_value());
  CHECK(even->chunks == 2);
  CHECK(even->images_per_chunk == 3);
  CHECK(even->dw_offset >= 3 * 6 * 6 * 152 * 2);

  // Stride 1 too: VGG's first convolution, 3 x 3 x 3 = 27 values a row.
  const auto vgg = detail::plan_unfolded_wgrad(shape(2, 3, 6, 6, 8, 3, 3, 1, 1, 1), 1 << 20, &why);
  REQUIRE(vgg.has_value());
  CHECK(vgg->unfolded.ld == 32);
  CHECK(vgg->chunks == 1);
  CHECK(vgg->dw_ld == 28);
  CHECK(vgg->workspace_bytes == (2 * 6 * 6 * 32 * 2 + 255) / 256 * 256 + 8 * 28 * 4);
  // Rows of a multiple of 4 floats are written in place.
  const auto wide = detail::plan_unfolded_wgrad(shape(2, 8, 6, 6, 8, 3, 3, 1, 2, 2), 1 << 20, &why);
  REQUIRE(wide.has_value());
  CHECK_FALSE(wide->stages_dw());
  CHECK(wide->dw_ld == 72);
  CHECK(wide->workspace_bytes == 2 * 3 * 3 * 72 * 2);
  ConvGraphShape nchw = stem;
  nchw.nhwc = false;
  CHECK_FALSE(detail::plan_unfolded_wgrad(nchw, 1 << 20, &why));
  CHECK(why.find("NCHW") != std::string::npos);
  ConvGraphShape wrong = stem;
  wrong.q += 1;
  CHECK_FALSE(detail::plan_unfolded_wgrad(wrong, 1 << 20, &why));
}

TEST_CASE("unfolded weight gradient: each row's taps read the pixels the convolution reads",
          "[unfolded_wgrad]") {
  const ConvGraphShape g = shape(2, 3, 9, 8, 4, 3, 5, 2, 2, 3);
  std::string why;
  const auto plan = detail::plan_unfolded_wgrad(g, 1 << 20, &why);
  REQUIRE(plan.has_value());
  const kernels::UnfoldedTaps& u = plan->unfolded;
  const kernels::FastDivide by_pq(static_cast<std::uint32_t>(u.p * u.q)),
      by_q(static_cast<std::uint32_t>(u.q)), by_s(static_cast<std::uint32_t>(u.s));
  std::size_t padding = 0;
  for (std::size_t t = 0; t < u.rows(); ++t)
    for (std::size_t tap = 0; tap < u.taps(); ++tap) {
      const std::size_t from = kernels::unfolded_source(u, t, tap);
      CHECK(from == kernels::unfolded_source(u, static_cast<std::uint32_t>(t),
                                             static_cast<std::uint32_t>(tap), by_pq, by_q, by_s));
      const std::size_t n = t / (u.p * u.q), p = t / u.q % u.p, q = t % u.q;
      const long i = long(p * u.stride_h + tap / u.s) - long(u.pad_h);
      const long j = long(q * u.stride_w + tap % u.s) - long(u.pad_w);
      if (i < 0 || j < 0 || i >= long(u.h) || j >= long(u.w)) {
        CHECK(from == kernels::kNoPixel);
        ++padding;
      } else {
        CHECK(from == (n * u.h + std::size_t(i)) * u.w + std::size_t(j));
      }
    }
  CHECK(padding > 0);
}

TEST_CASE("unfolded weight gradient: the GPU's sequence on the CPU against a direct sum",
          "[unfolded_wgrad]") {
  struct Case {
    ConvGraphShape g;
    std::size_t cap;
  };
  const std::vector<Case> cases = {
      {shape(3, 3, 11, 11, 8, 7, 7, 3, 2, 2), 1 << 20},  // a ResNet stem
      {shape(3, 16, 8, 8, 8, 1, 1, 0, 2, 2), 1 << 20},   // a 1x1 downsampling
      {shape(3, 8, 9, 9, 8, 3, 3, 1, 2, 2), 1 << 20},    // a 3x3 downsampling
      {shape(2, 4, 9, 8, 4, 3, 5, 2, 2, 3), 1 << 20},    // uneven strides and taps
      {shape(3, 8, 9, 9, 8, 3, 3, 1, 2, 2), 1},          // one image per chunk
      {shape(3, 3, 9, 8, 8, 3, 3, 1, 1, 1), 1 << 20},    // VGG's first convolution
      {shape(2, 5, 7, 9, 4, 5, 5, 2, 1, 1), 1 << 20},    // 5 channels, padding 2
      {shape(3, 3, 9, 8, 8, 3, 3, 1, 1, 1), 1},          // stride 1, an image a chunk
  };
  for (const Case& c : cases) {
    const ConvGraphShape& g = c.g;
    CAPTURE(g.n, g.c, g.h, g.w, g.k, g.r, g.s, g.pad_h, g.stride_h, g.stride_w, c.cap);
    std::string why;
    const auto plan = detail::plan_unfolded_wgrad(g, c.cap, &why);
    REQUIRE(plan.has_value());
    const auto x = test::on_grid(21, g.n * g.h * g.w * g.c, g.dtype);
    const auto dy = test::on_grid(22, g.n * g.p * g.q * g.k, g.dtype);
    std::vector<float> dw(g.k * g.r * g.s * g.c, std::nanf(""));
    detail::unfolded_wgrad_cpu(g, *plan, x.data(), dy.data(), dw.data());
    // fp32 sums of exact products over the rows (the padding's terms 0).
    const std::size_t outside = test::outside_accumulation_bound(
        dw, test::wgrad_reference(g, x, dy, /*kcrs=*/false), double(g.n * g.p * g.q));
    CHECK(outside == 0);
    if (c.cap == 1) CHECK(plan->chunks == g.n);
  }
}
