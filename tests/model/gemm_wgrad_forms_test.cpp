// ops/gemm_wgrad_forms.h: which weight-gradient GEMM forms a plan times for
// a channels-last convolution, in which order, and whether a form's
// operands are all 16-byte aligned (where a run may take it untried).
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "ops/gemm_wgrad_forms.h"
#include "tests/model/wgrad_reference.h"

using namespace ringtrain;
using detail::ConvGraphShape;
using Form = detail::GemmWgradForm;

namespace {

// n 4 of 12 x 10, square filters, the same padding and stride both ways.
ConvGraphShape conv(std::size_t c, std::size_t k, std::size_t r, std::size_t pad,
                    std::size_t stride) {
  return test::nhwc_conv(4, c, 12, 10, k, r, r, pad, pad, stride, stride);
}

bool aligned(const ConvGraphShape& g, Form form) {
  return detail::gemm_wgrad_form_aligned(g, form);
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
  // first, the unfolded input timed beside them; both aligned.
  const ConvGraphShape resnet = conv(64, 64, 3, 1, 1);
  CHECK(forms(resnet) == std::vector{Form::shifted_rows, Form::unfolded_input});
  CHECK(aligned(resnet, Form::shifted_rows));
  CHECK(aligned(resnet, Form::unfolded_input));
  // VGG's first convolution: 3 channels, whose shifted rows are 6 bytes
  // apart: the unfolded input first, aligned (its rows padded to 32 values,
  // dW's rows of 27 floats staged at a pitch of 28).
  const ConvGraphShape vgg = conv(3, 64, 3, 1, 1);
  CHECK(forms(vgg) == std::vector{Form::unfolded_input, Form::shifted_rows});
  CHECK(aligned(vgg, Form::unfolded_input));
  CHECK_FALSE(aligned(vgg, Form::shifted_rows));
  // 4 channels: dW rows of 36 floats (unstaged), unfolded rows padded to 40.
  const ConvGraphShape four = conv(4, 64, 3, 1, 1);
  CHECK(forms(four) == std::vector{Form::unfolded_input, Form::shifted_rows});
  CHECK(aligned(four, Form::unfolded_input));
  CHECK_FALSE(aligned(four, Form::shifted_rows));
  // A pointwise convolution without padding reads x and dy in place: the
  // shifted rows alone (aligned only where 8 divides C).
  CHECK(forms(conv(16, 32, 1, 0, 1)) == std::vector{Form::shifted_rows});
  CHECK(aligned(conv(16, 32, 1, 0, 1), Form::shifted_rows));
  CHECK(forms(conv(3, 32, 1, 0, 1)) == std::vector{Form::shifted_rows});
  CHECK_FALSE(aligned(conv(3, 32, 1, 0, 1), Form::shifted_rows));
  // With padding it copies, and both forms are listed.
  CHECK(forms(conv(16, 32, 1, 1, 1)) == std::vector{Form::shifted_rows, Form::unfolded_input});
  // Strided (a ResNet stem, a downsampling, a stride in one direction): the
  // unfolded input alone.
  CHECK(forms(conv(3, 64, 7, 3, 2)) == std::vector{Form::unfolded_input});
  CHECK(aligned(conv(3, 64, 7, 3, 2), Form::unfolded_input));
  CHECK(forms(conv(64, 128, 1, 0, 2)) == std::vector{Form::unfolded_input});
  CHECK(aligned(conv(64, 128, 1, 0, 2), Form::unfolded_input));
  ConvGraphShape one_way = conv(16, 32, 3, 1, 1);
  one_way.stride_w = 2;
  one_way.q = (one_way.w + 2 - 3) / 2 + 1;
  CHECK(forms(one_way) == std::vector{Form::unfolded_input});
  // dy's rows are K values: unaligned where 8 does not divide K.
  CHECK_FALSE(aligned(conv(64, 12, 3, 1, 1), Form::shifted_rows));
  CHECK_FALSE(aligned(conv(64, 12, 3, 1, 1), Form::unfolded_input));
}

TEST_CASE("weight-gradient GEMM forms: none for NCHW memory or wrong extents, and why",
          "[gemm_wgrad_forms]") {
  std::string why;
  ConvGraphShape nchw = conv(8, 8, 3, 1, 1);
  nchw.nhwc = false;
  CHECK(detail::gemm_wgrad_forms(nchw, &why).empty());
  CHECK(why.find("NCHW") != std::string::npos);
  ConvGraphShape wrong = conv(8, 8, 3, 1, 2);
  wrong.q += 1;
  why.clear();
  CHECK(detail::gemm_wgrad_forms(wrong, &why).empty());
  CHECK(why.find("not the convolution's") != std::string::npos);
}

TEST_CASE("weight-gradient GEMM names: the form, the filter, the cap, the rank",
          "[gemm_wgrad_forms]") {
  using detail::gemm_wgrad_engine_name;
  using detail::gemm_wgrad_first_rank;
  const ConvGraphShape g = conv(64, 64, 3, 1, 1);
  const std::size_t large = std::size_t{256} << 20, cached = std::size_t{32} << 20;
  CHECK(gemm_wgrad_engine_name(Form::shifted_rows, g, false, large, 0) ==
        "cublasLt-shifted-gemm-3x3-256MiB");
  CHECK(gemm_wgrad_engine_name(Form::unfolded_input, g, false, cached, 2) ==
        "cublasLt-unfolded-gemm-3x3-32MiB-algo2");
  CHECK(gemm_wgrad_engine_name(Form::shifted_rows, conv(16, 32, 1, 0, 1), true, large, 1) ==
        "cublasLt-gemm-algo1");
  CHECK(gemm_wgrad_engine_name(Form::unfolded_input, g, false, 100, 0) ==
        "cublasLt-unfolded-gemm-3x3-100B");
  // The name does not depend on the batch (a batch that was not timed
  // builds the timed one's choice by it).
  ConvGraphShape other = g;
  other.n = 3;
  CHECK(gemm_wgrad_engine_name(Form::unfolded_input, other, false, cached, 2) ==
        gemm_wgrad_engine_name(Form::unfolded_input, g, false, cached, 2));
  CHECK(detail::names_gemm_wgrad("cublasLt-gemm"));
  CHECK_FALSE(detail::names_gemm_wgrad("eng70{k2=3}"));
  // The first-algorithm twin of a record's name ("<engine> dW <dtype> <order>").
  CHECK(gemm_wgrad_first_rank("cublasLt-unfolded-gemm-3x3-32MiB-algo2 dW f32 KRSC") ==
        "cublasLt-unfolded-gemm-3x3-32MiB dW f32 KRSC");
  CHECK(gemm_wgrad_first_rank("cublasLt-gemm-algo12") == "cublasLt-gemm");
  CHECK(gemm_wgrad_first_rank("cublasLt-gemm dW f32 KCRS") == "cublasLt-gemm dW f32 KCRS");
  CHECK(gemm_wgrad_first_rank("eng70-algo1 dW f32 KRSC") == "eng70-algo1 dW f32 KRSC");
  CHECK(gemm_wgrad_first_rank("cublasLt-gemm-algo") == "cublasLt-gemm-algo");  // no rank
  CHECK(gemm_wgrad_first_rank("cublasLt-gemm-algorithm") == "cublasLt-gemm-algorithm");
}
