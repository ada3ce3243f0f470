// ops/gemm_wgrad_forms.h: which weight-gradient GEMM forms a plan times for
// a channels-last convolution, in which order, and whether an untimed run
// may take the first (every operand 16-byte aligned).
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "ops/gemm_wgrad_forms.h"

using namespace ringtrain;
using detail::ConvGraphShape;
using Form = detail::GemmWgradForm;

namespace {

ConvGraphShape conv(std::size_t c, std::size_t k, std::size_t r, std::size_t pad,
                    std::size_t stride) {
  ConvGraphShape g;
  g.n = 4, g.c = c, g.h = 12, g.w = 10, g.k = k, g.r = r, g.s = r;
  g.pad_h = g.pad_w = pad;
  g.stride_h = g.stride_w = stride;
  g.p = (g.h + 2 * pad - r) / stride + 1;
  g.q = (g.w + 2 * pad - r) / stride + 1;
  g.nhwc = true;
  g.dtype = DType::bf16;
  return g;
}

std::vector<Form> forms(const ConvGraphShape& g) {
  std::string why;
  auto out = detail::gemm_wgrad_forms(g, &why);
  CHECK(why.empty());
  return out;
}

}  // namespace

TEST_CASE("weight-gradient GEMM forms: the order a plan times them in", "[gemm_wgrad_forms]") {
  // Stride 1, channels a multiple of 8 (a ResNet's 3x3): the shifted rows
  // first, the unfolded input timed beside them.
  CHECK(forms(conv(64, 64, 3, 1, 1)) == std::vector{Form::shifted_rows, Form::unfolded_input});
  CHECK(detail::gemm_wgrad_aligned(conv(64, 64, 3, 1, 1)));
  // VGG's first convolution: 3 channels, whose shifted rows are 6 bytes
  // apart: the unfolded input first, and it is aligned.
  CHECK(forms(conv(3, 64, 3, 1, 1)) == std::vector{Form::unfolded_input, Form::shifted_rows});
  CHECK(detail::gemm_wgrad_aligned(conv(3, 64, 3, 1, 1)));
  // A pointwise convolution without padding reads x and dy in place: the
  // shifted rows alone (aligned only where 8 divides C).
  CHECK(forms(conv(16, 32, 1, 0, 1)) == std::vector{Form::shifted_rows});
  CHECK(detail::gemm_wgrad_aligned(conv(16, 32, 1, 0, 1)));
  CHECK(forms(conv(3, 32, 1, 0, 1)) == std::vector{Form::shifted_rows});
  CHECK_FALSE(detail::gemm_wgrad_aligned(conv(3, 32, 1, 0, 1)));
  // Strided (a ResNet stem, a downsampling): the unfolded input alone.
  CHECK(forms(conv(3, 64, 7, 3, 2)) == std::vector{Form::unfolded_input});
  CHECK(detail::gemm_wgrad_aligned(conv(3, 64, 7, 3, 2)));
  CHECK(forms(conv(64, 128, 1, 0, 2)) == std::vector{Form::unfolded_input});
  // dy's rows are K values: unaligned where 8 does not divide K.
  CHECK_FALSE(detail::gemm_wgrad_aligned(conv(64, 12, 3, 1, 1)));
  CHECK_FALSE(detail::gemm_wgrad_aligned(conv(3, 12, 7, 3, 2)));
}

TEST_CASE("weight-gradient GEMM forms: none for NCHW memory or wrong extents, and why",
          "[gemm_wgrad_forms]") {
  std::string why;
  ConvGraphShape nchw = conv(8, 8, 3, 1, 1);
  nchw.nhwc = false;
  CHECK(detail::gemm_wgrad_forms(nchw, &why).empty());
  CHECK(why.find("NCHW") != std::string::npos);
  CHECK_FALSE(detail::gemm_wgrad_aligned(nchw));
  ConvGraphShape wrong = conv(8, 8, 3, 1, 2);
  wrong.q += 1;
  why.clear();
  CHECK(detail::gemm_wgrad_forms(wrong, &why).empty());
  CHECK(why.find("not the convolution's") != std::string::npos);
  CHECK_FALSE(detail::gemm_wgrad_aligned(wrong));
}
