#include "ops/unfolded_gemm_wgrad.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include <fmt/format.h>

#include "ringtrain/core/check.h"

namespace ringtrain::detail {

std::optional<UnfoldedWgradPlan> plan_unfolded_wgrad(const ConvGraphShape& s,
                                                     std::size_t workspace_cap,
                                                     std::string* why_not) {
  const auto refuse = [&](std::string why) {
    *why_not = std::move(why);
    return std::nullopt;
  };
  if (!s.nhwc) return refuse("NCHW memory (the unfolded GEMM needs channels-last)");
  if (s.n == 0 || s.c == 0 || s.k == 0 || s.r == 0 || s.s == 0 || s.stride_h == 0 ||
      s.stride_w == 0)
    return refuse("an empty extent");
  const std::size_t hp = s.h + 2 * s.pad_h, wp = s.w + 2 * s.pad_w;
  if (hp < s.r || wp < s.s || s.p != (hp - s.r) / s.stride_h + 1 ||
      s.q != (wp - s.s) / s.stride_w + 1)
    return refuse(
        fmt::format("output {}x{} is not the convolution's of {}x{}", s.p, s.q, s.h, s.w));
  UnfoldedWgradPlan plan;
  const std::size_t width = s.r * s.s * s.c, ld = (width + 7) / 8 * 8;
  const std::size_t per_image = s.p * s.q * ld * dtype_size(s.dtype);
  const std::size_t most = std::clamp<std::size_t>(workspace_cap / per_image, 1, s.n);
  // As many chunks as that takes, their images spread evenly (one chunking
  // per chunk count, so that two caps that need as many chunks plan the
  // same ones).
  plan.chunks = (s.n + most - 1) / most;
  plan.images_per_chunk = (s.n + plan.chunks - 1) / plan.chunks;
  plan.chunks = (s.n + plan.images_per_chunk - 1) / plan.images_per_chunk;
  plan.unfolded = {.images = plan.images_per_chunk,
                   .h = s.h,
                   .w = s.w,
                   .c = s.c,
                   .p = s.p,
                   .q = s.q,
                   .r = s.r,
                   .s = s.s,
                   .pad_h = s.pad_h,
                   .pad_w = s.pad_w,
                   .stride_h = s.stride_h,
                   .stride_w = s.stride_w,
                   .ld = ld};
  plan.workspace_bytes = plan.images_per_chunk * per_image;
  plan.dw_ld = (width + 3) / 4 * 4;
  if (plan.stages_dw()) {
    plan.dw_offset = (plan.workspace_bytes + 255) / 256 * 256;
    plan.workspace_bytes = plan.dw_offset + s.k * plan.dw_ld * sizeof(float);
  }
  return plan;
}

void unfolded_wgrad_cpu(const ConvGraphShape& s, const UnfoldedWgradPlan& plan, const float* x,
                        const float* dy, float* dw) {
  const std::size_t width = s.r * s.s * s.c;
  RT_CHECK(plan.dw_ld >= width, "unfolded weight gradient: dW rows of {} in {}", width, plan.dw_ld);
  // The GEMMs' D: dW itself, or the staging rows (their padding NaN: never
  // written, never copied).
  std::vector<float> staged;
  if (plan.stages_dw()) staged.assign(s.k * plan.dw_ld, std::nanf(""));
  float* d = plan.stages_dw() ? staged.data() : dw;
  for (std::size_t k = 0; k < s.k; ++k) std::fill_n(d + k * plan.dw_ld, width, 0.0f);
  std::vector<float> u;
  for (std::size_t chunk = 0; chunk < plan.chunks; ++chunk) {
    const std::size_t first = chunk * plan.images_per_chunk;
    kernels::UnfoldedTaps g = plan.unfolded;
    g.images = std::min(plan.images_per_chunk, s.n - first);
    const float* xs = x + first * s.h * s.w * s.c;
    const float* dys = dy + first * s.p * s.q * s.k;
    // The columns past R S C stay NaN: the GEMM never reads them.
    u.assign(g.rows() * g.ld, std::nanf(""));
    for (std::size_t t = 0; t < g.rows(); ++t)
      for (std::size_t tap = 0; tap < g.taps(); ++tap) {
        const std::size_t from = kernels::unfolded_source(g, t, tap);
        for (std::size_t k = 0; k < s.c; ++k)
          u[t * g.ld + tap * s.c + k] = from == kernels::kNoPixel ? 0.0f : xs[from * s.c + k];
      }
    for (std::size_t k = 0; k < s.k; ++k)
      for (std::size_t j = 0; j < width; ++j) {
        float sum = 0.0f;
        for (std::size_t t = 0; t < g.rows(); ++t) sum += dys[t * s.k + k] * u[t * g.ld + j];
        d[k * plan.dw_ld + j] += sum;
      }
  }
  if (plan.stages_dw())
    for (std::size_t k = 0; k < s.k; ++k)
      std::copy_n(staged.data() + k * plan.dw_ld, width, dw + k * width);
}

}  // namespace ringtrain::detail
