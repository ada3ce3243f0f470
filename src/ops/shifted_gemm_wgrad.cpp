#include "ops/shifted_gemm_wgrad.h"

#include <algorithm>
#include <cmath>
#include <tuple>
#include <vector>

#include <fmt/format.h>

#include "ringtrain/core/check.h"

namespace ringtrain::detail {

namespace {
constexpr std::size_t kAlign = 256;
std::size_t aligned(std::size_t bytes) {
  return (bytes + kAlign - 1) / kAlign * kAlign;
}
}  // namespace

std::optional<ShiftedWgradPlan> plan_shifted_wgrad(const ConvGraphShape& s,
                                                   std::size_t workspace_cap,
                                                   std::string* why_not) {
  const auto refuse = [&](std::string why) {
    *why_not = std::move(why);
    return std::nullopt;
  };
  if (s.stride_h != 1 || s.stride_w != 1)
    return refuse(
        fmt::format("stride {}x{} (the rows' GEMMs need stride 1)", s.stride_h, s.stride_w));
  if (!s.nhwc) return refuse("NCHW memory (the rows' GEMMs need channels-last)");
  if (s.n == 0 || s.c == 0 || s.k == 0 || s.r == 0 || s.s == 0) return refuse("an empty extent");
  const std::size_t hp = s.h + 2 * s.pad_h, wp = s.w + 2 * s.pad_w;
  if (hp < s.r || wp < s.s || s.p != hp - s.r + 1 || s.q != wp - s.s + 1)
    return refuse(
        fmt::format("output {}x{} is not a stride-1 convolution's of {}x{}", s.p, s.q, s.h, s.w));
  ShiftedWgradPlan plan;
  plan.in_place = s.r == 1 && s.s == 1 && s.pad_h == 0 && s.pad_w == 0;
  const std::size_t tail = (s.r - 1) * wp + (s.s - 1);
  plan.x_grid = {.images = 0,
                 .h = s.h,
                 .w = s.w,
                 .hp = hp,
                 .wp = wp,
                 .top = s.pad_h,
                 .left = s.pad_w,
                 .tail = tail};
  plan.dy_grid = {
      .images = 0, .h = s.p, .w = s.q, .hp = hp, .wp = wp, .top = 0, .left = 0, .tail = 0};
  const std::size_t bytes = dtype_size(s.dtype);
  const auto need = [&](std::size_t images) {
    const std::size_t x_bytes = (images * hp * wp + tail) * s.c * bytes;
    return std::pair{aligned(x_bytes), aligned(x_bytes) + images * hp * wp * s.k * bytes};
  };
  if (plan.in_place) {
    plan.images_per_chunk = s.n;
  } else {
    // As many images as fit the cap, at least one.
    std::size_t images = 1;
    while (images < s.n && need(images + 1).second <= workspace_cap) ++images;
    // As many chunks as that takes, their images spread evenly (the last
    // one short by less than a chunk's count: one chunking per chunk count,
    // so that two caps that need as many chunks plan the same ones).
    const std::size_t chunks = (s.n + images - 1) / images;
    images = (s.n + chunks - 1) / chunks;
    plan.images_per_chunk = images;
    std::tie(plan.dy_offset, plan.workspace_bytes) = need(images);
  }
  plan.chunks = (s.n + plan.images_per_chunk - 1) / plan.images_per_chunk;
  plan.x_grid.images = plan.dy_grid.images = plan.images_per_chunk;
  return plan;
}

ChunkImages chunk_images(const ShiftedWgradPlan& plan, const ConvGraphShape& s, std::size_t chunk) {
  RT_CHECK(chunk < plan.chunks, "shifted weight gradient: chunk {} of {}", chunk, plan.chunks);
  const std::size_t first = chunk * plan.images_per_chunk;
  return {first, std::min(plan.images_per_chunk, s.n - first)};
}

void shifted_wgrad_cpu(const ConvGraphShape& s, const ShiftedWgradPlan& plan, const float* x,
                       const float* dy, float* dw) {
  const std::size_t taps = s.r * s.s;
  std::fill(dw, dw + s.k * taps * s.c, 0.0f);
  std::vector<float> xg, dyg;
  for (std::size_t chunk = 0; chunk < plan.chunks; ++chunk) {
    const ChunkImages images = chunk_images(plan, s, chunk);
    const float* xs = x + images.first * s.h * s.w * s.c;
    const float* dys = dy + images.first * s.p * s.q * s.k;
    std::size_t rows = images.count * s.h * s.w;  // in place: the pixels themselves
    if (!plan.in_place) {
      kernels::PaddedRows xr = plan.x_grid, dyr = plan.dy_grid;
      xr.images = dyr.images = images.count;
      // NaN first, as a reused workspace may hold anything: every row is
      // written, a pixel or zeros, as the GPU's copy writes it.
      xg.assign(xr.rows() * s.c, std::nanf(""));
      dyg.assign(dyr.rows() * s.k, std::nanf(""));
      const auto place = [](const kernels::PaddedRows& g, const float* from, std::size_t width,
                            std::vector<float>& to) {
        for (std::size_t t = 0; t < g.rows(); ++t) {
          const std::size_t pixel = kernels::padded_row_source(g, t);
          for (std::size_t k = 0; k < width; ++k)
            to[t * width + k] = pixel == kernels::kNoPixel ? 0.0f : from[pixel * width + k];
        }
      };
      place(xr, xs, s.c, xg);
      place(dyr, dys, s.k, dyg);
      xs = xg.data();
      dys = dyg.data();
      rows = dyr.rows();
    }
    // Each tap's GEMM: m = K, n = C, k = rows; a chunk after the first adds
    // its fp32 sum to dW (beta 1).
    for (std::size_t r = 0; r < s.r; ++r)
      for (std::size_t q = 0; q < s.s; ++q) {
        const float* xt = xs + plan.row_shift(r, q) * s.c;
        float* block = dw + (r * s.s + q) * s.c;
        for (std::size_t k = 0; k < s.k; ++k)
          for (std::size_t c = 0; c < s.c; ++c) {
            float sum = 0.0f;
            for (std::size_t t = 0; t < rows; ++t) sum += dys[t * s.k + k] * xt[t * s.c + c];
            block[k * taps * s.c + c] += sum;
          }
      }
  }
}

}  // namespace ringtrain::detail
