// ops/shifted_gemm_wgrad.h on the CPU: the plan (which shapes it takes, how
// it chunks the batch within its workspace), the padded grids' rows
// (kernels/shifted_rows.cuh, the same function the GPU's copy runs, by plain
// and by FastDivide division), and the twin of the GPU's sequence against a
// direct double-precision sum, across filters, paddings and chunkings.
#include <catch2/catch.hpp>

#include <cmath>
#include <string>
#include <vector>

#include "kernels/shifted_rows.cuh"
#include "ops/shifted_gemm_wgrad.h"
#include "tests/model/grid_values.h"
#include "tests/model/wgrad_reference.h"

using namespace ringtrain;
using detail::ConvGraphShape;

namespace {

ConvGraphShape shape(std::size_t n, std::size_t c, std::size_t h, std::size_t w, std::size_t k,
                     std::size_t r, std::size_t s, std::size_t pad_h, std::size_t pad_w) {
  return test::nhwc_conv(n, c, h, w, k, r, s, pad_h, pad_w, 1, 1);
}

}  // namespace

TEST_CASE("shifted weight gradient: the shapes it takes and refuses", "[shifted_wgrad]") {
  std::string why;
  const auto plan = detail::plan_shifted_wgrad(shape(2, 8, 6, 5, 4, 3, 3, 1, 1), 1 << 20, &why);
  REQUIRE(plan.has_value());
  CHECK_FALSE(plan->in_place);
  CHECK(plan->x_grid.hp == 8);
  CHECK(plan->x_grid.wp == 7);
  CHECK(plan->x_grid.tail == 2 * 7 + 2);  // the last row's largest shift
  CHECK(plan->row_shift(2, 1) == 2 * 7 + 1);
  CHECK(plan->dy_grid.tail == 0);

  const auto pointwise = detail::plan_shifted_wgrad(shape(4, 8, 6, 5, 4, 1, 1, 0, 0), 0, &why);
  REQUIRE(pointwise.has_value());
  CHECK(pointwise->in_place);
  CHECK(pointwise->workspace_bytes == 0);
  CHECK(pointwise->chunks == 1);

  ConvGraphShape strided = shape(2, 8, 6, 6, 4, 3, 3, 1, 1);
  strided.stride_h = strided.stride_w = 2;
  strided.p = strided.q = 3;
  CHECK_FALSE(detail::plan_shifted_wgrad(strided, 1 << 20, &why).has_value());
  CHECK(why.find("stride 2x2") != std::string::npos);

  ConvGraphShape nchw = shape(2, 8, 6, 6, 4, 3, 3, 1, 1);
  nchw.nhwc = false;
  CHECK_FALSE(detail::plan_shifted_wgrad(nchw, 1 << 20, &why).has_value());
  CHECK(why.find("NCHW") != std::string::npos);

  ConvGraphShape wrong = shape(2, 8, 6, 6, 4, 3, 3, 1, 1);
  wrong.p = 5;
  CHECK_FALSE(detail::plan_shifted_wgrad(wrong, 1 << 20, &why).has_value());
  CHECK(why.find("not a stride-1") != std::string::npos);
}

TEST_CASE("shifted weight gradient: chunks of images within the workspace", "[shifted_wgrad]") {
  const ConvGraphShape g = shape(7, 8, 6, 5, 4, 3, 3, 1, 1);
  std::string why;
  const auto whole = detail::plan_shifted_wgrad(g, std::size_t{1} << 30, &why);
  REQUIRE(whole.has_value());
  CHECK(whole->chunks == 1);
  CHECK(whole->images_per_chunk == 7);
  // x's grid (7 images of 8 x 7 rows and the tail, 8 channels) 256-aligned,
  // then dy's (7 x 8 x 7 rows of 4 channels), 2 bytes each.
  const std::size_t x_bytes = (7 * 56 + 16) * 8 * 2;
  CHECK(whole->dy_offset == (x_bytes + 255) / 256 * 256);
  CHECK(whole->workspace_bytes == whole->dy_offset + 7 * 56 * 4 * 2);

  // A cap for about 3 images: chunks of 3, 3 and 1, each within the cap.
  const std::size_t one = (56 + 16) * 8 * 2 + 255 + 56 * 4 * 2;
  const auto parts = detail::plan_shifted_wgrad(g, 3 * one, &why);
  REQUIRE(parts.has_value());
  CHECK(parts->images_per_chunk == 3);
  CHECK(parts->chunks == 3);
  CHECK(parts->workspace_bytes <= 3 * one);
  CHECK(detail::chunk_images(*parts, g, 2).first == 6);
  CHECK(detail::chunk_images(*parts, g, 2).count == 1);
  CHECK_THROWS(detail::chunk_images(*parts, g, 3));

  // Room for 9 of 10 images: two chunks of 5, not 9 and 1 (one chunking per
  // chunk count).
  const ConvGraphShape ten = shape(10, 8, 6, 5, 4, 3, 3, 1, 1);
  const std::size_t nine = ((9 * 56 + 16) * 8 * 2 + 255) / 256 * 256 + 9 * 56 * 4 * 2;
  const auto even = detail::plan_shifted_wgrad(ten, nine, &why);
  REQUIRE(even.has_value());
  CHECK(even->chunks == 2);
  CHECK(even->images_per_chunk == 5);

  // Below one image's need: one image at a time all the same.
  const auto tight = detail::plan_shifted_wgrad(g, 16, &why);
  REQUIRE(tight.has_value());
  CHECK(tight->images_per_chunk == 1);
  CHECK(tight->chunks == 7);
}

TEST_CASE("shifted weight gradient: each pixel in one grid row, by either division",
          "[shifted_wgrad]") {
  using kernels::kNoPixel;
  for (const kernels::PaddedRows g :
       {kernels::PaddedRows{
            .images = 3, .h = 5, .w = 4, .hp = 7, .wp = 6, .top = 1, .left = 1, .tail = 14},
        kernels::PaddedRows{
            .images = 2, .h = 3, .w = 7, .hp = 5, .wp = 9, .top = 0, .left = 0, .tail = 0},
        kernels::PaddedRows{
            .images = 1, .h = 4, .w = 4, .hp = 10, .wp = 4, .top = 3, .left = 0, .tail = 3}}) {
    std::vector<int> seen(g.images * g.h * g.w, 0);
    const kernels::FastDivide by_grid(static_cast<std::uint32_t>(g.hp * g.wp)),
        by_wp(static_cast<std::uint32_t>(g.wp));
    for (std::size_t t = 0; t < g.rows(); ++t) {
      const std::size_t from = kernels::padded_row_source(g, t);
      CHECK(from == kernels::padded_row_source(g, static_cast<std::uint32_t>(t), by_grid, by_wp));
      if (from == kNoPixel) continue;
      REQUIRE(from < seen.size());
      ++seen[from];
      // Where it sits: its image's grid, shifted by (top, left).
      const std::size_t n = from / (g.h * g.w), i = from / g.w % g.h, j = from % g.w;
      CHECK(t == n * g.hp * g.wp + (i + g.top) * g.wp + j + g.left);
    }
    for (int count : seen) CHECK(count == 1);
  }
}

TEST_CASE("shifted weight gradient: the GPU's sequence on the CPU against a direct sum",
          "[shifted_wgrad]") {
  struct Case {
    ConvGraphShape g;
    std::size_t cap;
  };
  const std::vector<Case> cases = {
      {shape(3, 16, 6, 5, 8, 1, 1, 0, 0), 0},                     // in place, one GEMM
      {shape(3, 16, 6, 5, 8, 3, 3, 1, 1), std::size_t{1} << 20},  // one chunk
      {shape(5, 8, 6, 5, 8, 3, 3, 1, 1), 4000},                   // chunks of 2, 2, 1
      {shape(2, 8, 7, 6, 4, 3, 3, 0, 0), 1 << 20},                // no padding: dy's grid wider
      {shape(2, 8, 9, 8, 4, 5, 5, 2, 2), 1 << 20},                // 5x5
      {shape(2, 8, 6, 9, 4, 1, 7, 0, 3), 1 << 20},                // Inception's 1x7
      {shape(2, 8, 9, 6, 4, 7, 1, 3, 0), 1 << 20},                // and 7x1
      {shape(3, 3, 5, 5, 4, 2, 2, 0, 0), 1},  // even filter, odd channels, 1 image each
  };
  for (const Case& c : cases) {
    const ConvGraphShape& g = c.g;
    CAPTURE(g.n, g.c, g.h, g.w, g.k, g.r, g.s, g.pad_h, g.pad_w, c.cap);
    std::string why;
    const auto plan = detail::plan_shifted_wgrad(g, c.cap, &why);
    REQUIRE(plan.has_value());
    const auto x = test::on_grid(11, g.n * g.h * g.w * g.c, g.dtype);
    const auto dy = test::on_grid(12, g.n * g.p * g.q * g.k, g.dtype);
    std::vector<float> dw(g.k * g.r * g.s * g.c, std::nanf(""));
    detail::shifted_wgrad_cpu(g, *plan, x.data(), dy.data(), dw.data());
    // fp32 sums of exact products over a chunk's grid rows (the padding's
    // terms are exact zeros), chunks added.
    const double rows = double(g.n * plan->x_grid.hp * plan->x_grid.wp);
    const std::size_t outside =
        test::outside_accumulation_bound(dw, test::wgrad_reference(g, x, dy, /*kcrs=*/false), rows);
    CHECK(outside == 0);
    CHECK(plan->chunks == (g.n + plan->images_per_chunk - 1) / plan->images_per_chunk);
    if (c.cap == 4000) CHECK(plan->images_per_chunk == 2);
  }
}
