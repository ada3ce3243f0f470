// kernels/pool2d.cuh, the arithmetic the GPU's pooling kernels run, checked
// on the CPU: each input's covering outputs are exactly the windows that hold
// it (at most ceil(k / s) a side, as the GPU's unrolled backward loads them;
// for k == s, the one window of its tile, as the tiled backward takes it),
// the forward matches a plain loop, and the GPU's gather backward gives
// the bits of the CPU's scatter (Pool2dOp::backward) for max and average
// pools, with overlapping windows, padding, ties and both layouts.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/layout.cuh"
#include "kernels/pool2d.cuh"
#include "ringtrain/ops/compute_context.h"
#include "ringtrain/ops/pool2d.h"

using namespace ringtrain;
using kernels::PoolShape;
using kernels::PoolSpan;

namespace {

struct Case {
  std::size_t height, width, kernel, stride, padding;
};

const Case kCases[] = {{8, 8, 2, 2, 0},  {9, 7, 2, 2, 0},  {9, 9, 2, 2, 1}, {11, 11, 3, 2, 1},
                       {10, 9, 3, 2, 0}, {7, 7, 3, 1, 1},  {6, 5, 1, 2, 0}, {13, 12, 5, 3, 2},
                       {5, 5, 5, 1, 2},  {35, 35, 3, 1, 1}};

PoolShape shape_of(const Pool2dGeometry& g) {
  const auto u = [](std::size_t v) { return static_cast<std::uint32_t>(v); };
  return {u(g.height), u(g.width),  u(g.out_height()), u(g.out_width()),
          u(g.kernel), u(g.stride), u(g.padding)};
}

}  // namespace

TEST_CASE(
    "pool_covering_span lists exactly the windows that hold an input, at most ceil(k / s) a side",
    "[kernels]") {
  for (const Case& c : kCases) {
    Pool2dGeometry g;
    g.channels = 1, g.height = c.height, g.width = c.width;
    g.kernel = c.kernel, g.stride = c.stride, g.padding = c.padding;
    const PoolShape s = shape_of(g);
    for (std::uint32_t i = 0; i < s.height; ++i) {
      const PoolSpan cover = kernels::pool_covering_span(i, s.out_height, s);
      // The GPU's unrolled backward loads at most pool_max_cover outputs a side.
      CHECK(cover.end - std::min(cover.begin, cover.end) <=
            kernels::pool_max_cover(s.kernel, s.stride));
      if (s.kernel == s.stride) {
        // Its tiled backward for windows that do not overlap: input i is in
        // tile (i + p) / k, of ceil((n + p) / k) tiles, which is output
        // (i + p) / k's window where that output exists, and no window's else.
        const std::uint32_t tile = (i + s.padding) / s.kernel;
        CHECK(tile < (s.height + s.padding + s.kernel - 1) / s.kernel);
        CHECK(s.out_height <= (s.height + s.padding + s.kernel - 1) / s.kernel);
        if (tile < s.out_height)
          CHECK((cover.begin == tile && cover.end == tile + 1));
        else
          CHECK(cover.begin >= cover.end);
      }
      for (std::uint32_t o = 0; o < s.out_height; ++o) {
        const PoolSpan window = kernels::pool_window_span(o, s.height, s);
        CAPTURE(c.height, c.kernel, c.stride, c.padding, i, o);
        CHECK((window.begin < window.end && window.end - window.begin <= s.kernel));
        CHECK((window.begin <= i && i < window.end) == (cover.begin <= o && o < cover.end));
      }
    }
  }
}

TEST_CASE("the gather backward of kernels/pool2d.cuh gives the CPU's bits", "[kernels]") {
  auto ctx = ComputeContext::create(Device::cpu());
  std::mt19937 rng(11);
  // Values from a small set, so windows often hold ties.
  std::uniform_int_distribution<int> level(-3, 3);
  std::normal_distribution<float> grad(0.0f, 1.0f);
  const std::size_t batch = 2, channels = 3;
  for (const Case& c : kCases)
    for (const PoolMode mode : {PoolMode::max, PoolMode::average})
      for (const Layout layout : {Layout::nchw, Layout::nhwc}) {
        Pool2dGeometry g;
        g.channels = channels, g.height = c.height, g.width = c.width;
        g.kernel = c.kernel, g.stride = c.stride, g.padding = c.padding;
        g.mode = mode, g.layout = layout;
        const PoolShape s = shape_of(g);
        const bool nhwc = layout == Layout::nhwc, max = mode == PoolMode::max;
        CAPTURE(c.height, c.width, c.kernel, c.stride, c.padding, max, nhwc);
        const std::size_t in_pixels = s.height * s.width, out_pixels = s.out_height * s.out_width;
        std::vector<float> x(batch * channels * in_pixels), dy(batch * channels * out_pixels);
        for (float& v : x) v = 0.5f * static_cast<float>(level(rng));
        for (float& v : dy) v = grad(rng);
        std::vector<float> y(dy.size()), dx(x.size());
        Pool2dOp op(*ctx, g, batch);
        op.forward(x.data(), y.data(), batch);
        op.backward(x.data(), y.data(), dy.data(), dx.data(), batch);

        const auto at = [&](std::size_t n, std::size_t ch, std::size_t p, std::size_t hw) {
          return nhwc ? kernels::nhwc_index(n, ch, p, channels, hw)
                      : kernels::nchw_index(n, ch, p, channels, hw);
        };
        const std::uint32_t pixel = nhwc ? static_cast<std::uint32_t>(channels) : 1u;
        std::vector<std::int32_t> argmax(y.size());
        std::size_t windows_with_ties = 0;
        for (std::size_t n = 0; n < batch; ++n)
          for (std::size_t ch = 0; ch < channels; ++ch) {
            const kernels::StridedPlane<const float> xp{x.data() + at(n, ch, 0, in_pixels), pixel};
            for (std::uint32_t oh = 0; oh < s.out_height; ++oh)
              for (std::uint32_t ow = 0; ow < s.out_width; ++ow) {
                const PoolSpan rows = kernels::pool_window_span(oh, s.height, s),
                               cols = kernels::pool_window_span(ow, s.width, s);
                // A plain loop: the first maximum, or the sum over k^2.
                float best = xp[rows.begin * s.width + cols.begin], sum = 0.0f;
                std::uint32_t best_at = rows.begin * s.width + cols.begin, equal = 0;
                for (std::uint32_t r = rows.begin; r < rows.end; ++r)
                  for (std::uint32_t q = cols.begin; q < cols.end; ++q) {
                    const float v = xp[r * s.width + q];
                    sum += v;
                    if (v > best) best = v, best_at = r * s.width + q;
                  }
                for (std::uint32_t r = rows.begin; r < rows.end; ++r)
                  for (std::uint32_t q = cols.begin; q < cols.end; ++q)
                    equal += xp[r * s.width + q] == best ? 1u : 0u;
                windows_with_ties += max && equal > 1 ? 1 : 0;
                const std::size_t o = at(n, ch, oh * s.out_width + ow, out_pixels);
                std::int32_t arg = -1;
                const float kernel_y = max ? kernels::max_pool_output(xp, s, rows, cols, &arg)
                                           : kernels::avg_pool_output(xp, s, rows, cols);
                argmax[o] = arg;
                REQUIRE(std::memcmp(&kernel_y, &y[o], sizeof(float)) == 0);
                if (max) {
                  REQUIRE(y[o] == best);
                  REQUIRE(arg == static_cast<std::int32_t>(best_at));
                } else {
                  REQUIRE(y[o] == sum * (1.0f / static_cast<float>(s.kernel * s.kernel)));
                }
              }
          }
        if (max && c.kernel > 1) CHECK(windows_with_ties > 0);  // the ties were exercised
        // The gather, element by element, against the scatter's dx, bit for bit.
        for (std::size_t n = 0; n < batch; ++n)
          for (std::size_t ch = 0; ch < channels; ++ch) {
            const std::size_t out = at(n, ch, 0, out_pixels);
            const kernels::StridedPlane<const float> dyp{dy.data() + out, pixel};
            const kernels::StridedPlane<const std::int32_t> argp{argmax.data() + out, pixel};
            for (std::uint32_t h = 0; h < s.height; ++h)
              for (std::uint32_t w = 0; w < s.width; ++w) {
                const PoolSpan rows = kernels::pool_covering_span(h, s.out_height, s),
                               cols = kernels::pool_covering_span(w, s.out_width, s);
                const float gathered =
                    max ? kernels::max_pool_input_grad(dyp, argp, s, h, w, rows, cols)
                        : kernels::avg_pool_input_grad(dyp, s, rows, cols);
                const float scattered = dx[at(n, ch, h * s.width + w, in_pixels)];
                CAPTURE(n, ch, h, w, gathered, scattered);
                REQUIRE(std::memcmp(&gathered, &scattered, sizeof(float)) == 0);
              }
          }
      }
}
