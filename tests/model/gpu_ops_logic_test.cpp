// The host-side decisions of the GPU ops, which run (and are tested) without a
// GPU: cuDNN algorithm choice from Find's records, the bias-gradient split
// over thread blocks, and the --tf32 modes.
#include <catch2/catch.hpp>

#include <vector>

#include "kernels/bias.cuh"
#include "ops/conv_algo_choice.h"
#include "ringtrain/ops/math_mode.h"
#include "tests/model/test_data.h"

using namespace ringtrain;
using detail::choose_conv_algorithm;
using detail::ConvAlgoMath;
using detail::ConvAlgoRecord;
using detail::ConvAlgoRules;

namespace {
ConvAlgoRecord rec(int algo, float ms, std::size_t memory = 0, bool deterministic = true,
                   ConvAlgoMath math = ConvAlgoMath::fma, bool success = true) {
  return {algo, success, deterministic, memory, ms, math};
}
}  // namespace

TEST_CASE("conv algorithm choice: the fastest record that passes every rule", "[ops]") {
  const ConvAlgoRules fp32{1 << 20, true, false};
  SECTION("fastest wins, in any order") {
    const std::vector<ConvAlgoRecord> r{rec(0, 0.5f), rec(1, 0.2f), rec(2, 0.3f)};
    CHECK(choose_conv_algorithm(r, fp32) == std::optional<std::size_t>(1));
  }
  SECTION("failures, oversize workspaces and nondeterministic algorithms are skipped") {
    const std::vector<ConvAlgoRecord> r{rec(0, 0.1f, 0, false), rec(1, 0.1f, 2 << 20),
                                        rec(2, 0.1f, 0, true, ConvAlgoMath::fma, false),
                                        rec(3, 0.9f, 1 << 20)};
    CHECK(choose_conv_algorithm(r, fp32) == std::optional<std::size_t>(3));
    ConvAlgoRules any = fp32;
    any.require_deterministic = false;
    CHECK(choose_conv_algorithm(r, any) == std::optional<std::size_t>(0));
  }
  SECTION("tensor math only when TF32 is allowed; down-conversion to half never") {
    const std::vector<ConvAlgoRecord> r{rec(0, 0.1f, 0, true, ConvAlgoMath::tensor_down_conversion),
                                        rec(1, 0.2f, 0, true, ConvAlgoMath::tensor), rec(2, 0.4f)};
    CHECK(choose_conv_algorithm(r, fp32) == std::optional<std::size_t>(2));
    ConvAlgoRules tf32 = fp32;
    tf32.allow_tf32 = true;
    CHECK(choose_conv_algorithm(r, tf32) == std::optional<std::size_t>(1));
  }
  SECTION("ties go to the earlier record; nothing passing is nullopt") {
    const std::vector<ConvAlgoRecord> r{rec(5, 0.3f), rec(6, 0.3f)};
    CHECK(choose_conv_algorithm(r, fp32) == std::optional<std::size_t>(0));
    CHECK_FALSE(choose_conv_algorithm({}, fp32).has_value());
    const std::vector<ConvAlgoRecord> none{rec(0, 0.1f, 0, false), rec(1, -1.0f)};
    CHECK_FALSE(choose_conv_algorithm(none, fp32).has_value());
    const std::string text = detail::describe_conv_algorithms(none);
    CHECK_THAT(text, Catch::Contains("algo 0 (ok, nondeterministic, fma"));
    CHECK(detail::describe_conv_algorithms({}) == "none returned");
  }
}

TEST_CASE("conv algorithms a choice by time runs: the passing ones, in cuDNN's order", "[ops]") {
  using detail::conv_algorithms_to_time;
  const ConvAlgoRules fp32{1 << 20, true, false};
  // Backward filter: 0 ALGO_0, 1 ALGO_1, 2 FFT, 3 ALGO_3, 5 WINOGRAD_NONFUSED, 6 FFT_TILING.
  const std::vector<ConvAlgoRecord> r{rec(1, 0), rec(0, 1, 0, false), rec(2, 2),
                                      rec(5, 3), rec(3, 4, 2 << 20),  rec(6, 5)};
  using V = std::vector<std::size_t>;
  // TF32 allowed (not FMA-only): every passing record, FFT and Winograd too.
  CHECK(conv_algorithms_to_time(detail::ConvAlgoOp::backward_filter, r, fp32, false) ==
        V{0, 2, 3, 5});
  // --tf32 off: a transform only as the heuristics' own first.
  CHECK(conv_algorithms_to_time(detail::ConvAlgoOp::backward_filter, r, fp32, true) == V{0});
  const std::vector<ConvAlgoRecord> winograd_first{rec(5, 0), rec(1, 1), rec(6, 2)};
  CHECK(conv_algorithms_to_time(detail::ConvAlgoOp::backward_filter, winograd_first, fp32, true) ==
        V{0, 1});
  CHECK(conv_algorithms_to_time(detail::ConvAlgoOp::backward_filter, {}, fp32, true).empty());
}

TEST_CASE("conv algorithm names: cuDNN's enums, and the line bench step --layers shows", "[ops]") {
  using detail::ConvAlgoOp;
  CHECK(detail::conv_algo_name(ConvAlgoOp::forward, 1) == "IMPLICIT_PRECOMP_GEMM");
  CHECK(detail::conv_algo_name(ConvAlgoOp::forward, 7) == "WINOGRAD_NONFUSED");
  CHECK(detail::conv_algo_name(ConvAlgoOp::backward_filter, 1) == "ALGO_1");
  CHECK(detail::conv_algo_name(ConvAlgoOp::backward_filter, 6) == "FFT_TILING");
  CHECK(detail::conv_algo_name(ConvAlgoOp::backward_data, 3) == "FFT_TILING");
  CHECK(detail::conv_algo_name(ConvAlgoOp::backward_data, 6) == "algo 6");
  CHECK(detail::conv_algo_name(ConvAlgoOp::forward, -1) == "algo -1");
  CHECK(detail::describe_conv_choice(ConvAlgoOp::forward, 1, ConvAlgoMath::tensor, 3 << 19) ==
        "IMPLICIT_PRECOMP_GEMM tensor ws=1.50MiB");
  CHECK(detail::describe_conv_choice(ConvAlgoOp::backward_data, 1, ConvAlgoMath::fma, 0) ==
        "ALGO_1 fma ws=0B");
  CHECK(detail::describe_conv_choice(ConvAlgoOp::backward_data, 5, ConvAlgoMath::tensor, 6144) ==
        "WINOGRAD_NONFUSED tensor ws=6.0KiB");
  CHECK(detail::describe_conv_choice(ConvAlgoOp::backward_filter, 0, ConvAlgoMath::fma,
                                     std::size_t{1200} << 20) == "ALGO_0 fma ws=1200MiB");
}

TEST_CASE("conv algorithm choice: what the rules passed over to reach it", "[ops]") {
  using detail::ConvAlgoOp;
  const ConvAlgoRules rules{std::size_t{2} << 30, true, true};
  // cuDNN's heuristic order (time = rank): ALGO_0 nondeterministic, FFT over the
  // workspace, then ALGO_1 chosen; WINOGRAD after it is not "ahead".
  const std::vector<ConvAlgoRecord> r{rec(0, 0, 0, false, ConvAlgoMath::tensor),
                                      rec(2, 1, std::size_t{3} << 30), rec(1, 2),
                                      rec(4, 3, 0, false)};
  const auto pick = choose_conv_algorithm(r, rules);
  REQUIRE(pick == std::optional<std::size_t>(2));
  CHECK(detail::describe_passed_over(ConvAlgoOp::backward_filter, r, *pick, rules) ==
        "ALGO_0 nondeterministic; FFT workspace 3.0 GiB over 2.0 GiB");
  // cuDNN's first choice passes: nothing was passed over
  const std::vector<ConvAlgoRecord> first{rec(1, 0), rec(0, 1, 0, false)};
  CHECK(detail::describe_passed_over(ConvAlgoOp::forward, first, 0, rules).empty());
  // TF32 off: a tensor-core algorithm ahead is named as such
  const ConvAlgoRules fp32{std::size_t{2} << 30, true, false};
  const std::vector<ConvAlgoRecord> t{rec(1, 0, 0, true, ConvAlgoMath::tensor), rec(0, 1)};
  CHECK(detail::describe_passed_over(ConvAlgoOp::forward, t, 1, fp32) ==
        "IMPLICIT_PRECOMP_GEMM TF32 (off)");
}

namespace {
// The GPU's bias-gradient scheme replayed on the CPU: per (channel, slice) a
// partial sum over the slice's rows, then the slices' partials in order.
std::vector<float> split_bias_grad(const std::vector<float>& dy, std::size_t outer,
                                   std::size_t channels, std::size_t inner,
                                   const kernels::BiasGradSplit& s) {
  std::vector<float> partial(s.slices * channels, 0.0f), out(channels, 0.0f);
  for (std::size_t slice = 0; slice < s.slices; ++slice)
    for (std::size_t o = kernels::bias_slice_begin(slice, s.rows_per_slice);
         o < kernels::bias_slice_end(slice, s.rows_per_slice, outer); ++o)
      for (std::size_t c = 0; c < channels; ++c)
        for (std::size_t i = 0; i < inner; ++i)
          partial[slice * channels + c] += dy[(o * channels + c) * inner + i];
  for (std::size_t c = 0; c < channels; ++c)
    for (std::size_t slice = 0; slice < s.slices; ++slice) out[c] += partial[slice * channels + c];
  return out;
}
}  // namespace

TEST_CASE("bias gradient split: slices cover every row once and fit the scratch", "[ops]") {
  struct Case {
    std::size_t outer, channels, inner;
  };
  for (const Case& k : {Case{0, 5, 1}, Case{1, 1, 1}, Case{64, 10, 1}, Case{1024, 512, 1},
                        Case{1027, 10, 1}, Case{512, 32, 784}, Case{64, 32, 784}, Case{129, 3, 49},
                        Case{5, 7, 3}, Case{100000, 70000, 1}, Case{4096, 1, 4096}}) {
    INFO("outer " << k.outer << ", channels " << k.channels << ", inner " << k.inner);
    const std::size_t scratch = std::size_t{1} << 16;
    const kernels::BiasGradSplit s =
        kernels::bias_grad_split(k.outer, k.channels, k.inner, scratch);
    REQUIRE(s.slices >= 1);
    CHECK(s.channel_blocks == (k.inner == 1 ? (k.channels + 31) / 32 : k.channels));
    if (s.slices > 1) {
      CHECK(s.slices * k.channels <= scratch);
      CHECK(s.slices * s.channel_blocks <= 2 * kernels::kBiasTargetBlocks);
      // Every slice non-empty, together exactly [0, outer).
      CHECK(kernels::bias_slice_begin(s.slices - 1, s.rows_per_slice) < k.outer);
      CHECK(kernels::bias_slice_end(s.slices - 1, s.rows_per_slice, k.outer) == k.outer);
      const std::size_t min_elements =
          k.inner == 1 ? kernels::kBiasMinRowsPerBlock : kernels::kBiasMinElementsPerBlock;
      CHECK(s.rows_per_slice * k.inner >= min_elements);
    } else {
      CHECK(s.rows_per_slice == k.outer);
    }
  }
  // Few channels with many rows split; a small Linear does not.
  CHECK(kernels::bias_grad_split(512, 32, 784, 1 << 16).slices == 64);
  CHECK(kernels::bias_grad_split(1024, 512, 1, 1 << 16).slices == 16);
  CHECK(kernels::bias_grad_split(64, 10, 1, 1 << 16).slices == 1);
  // No scratch: one slice, whatever the shape.
  CHECK(kernels::bias_grad_split(512, 32, 784, 0).slices == 1);
}

TEST_CASE("bias gradient split: the two-pass sum equals the plain sum", "[ops]") {
  struct Case {
    std::size_t outer, channels, inner;
  };
  for (const Case& k : {Case{1027, 10, 1}, Case{300, 3, 49}, Case{2000, 40, 1}}) {
    const auto dy = test::hashed_vector(7, k.outer * k.channels * k.inner);
    const auto s = kernels::bias_grad_split(k.outer, k.channels, k.inner, 1 << 16);
    INFO("outer " << k.outer << ", slices " << s.slices);
    CHECK(s.slices > 1);
    const auto got = split_bias_grad(dy, k.outer, k.channels, k.inner, s);
    for (std::size_t c = 0; c < k.channels; ++c) {
      double want = 0;
      for (std::size_t o = 0; o < k.outer; ++o)
        for (std::size_t i = 0; i < k.inner; ++i) want += dy[(o * k.channels + c) * k.inner + i];
      CHECK(got[c] == Approx(want).margin(1e-3));
    }
  }
}

TEST_CASE("--tf32 modes follow PyTorch's defaults", "[ops]") {
  CHECK(parse_tf32_mode("default") == Tf32Mode::pytorch_default);
  CHECK(parse_tf32_mode("on") == Tf32Mode::on);
  CHECK(parse_tf32_mode("off") == Tf32Mode::off);
  CHECK_THROWS_WITH(parse_tf32_mode("yes"), Catch::Contains("--tf32") && Catch::Contains("'yes'"));
  // PyTorch: cudnn.allow_tf32 = True, cuda.matmul.allow_tf32 = False.
  CHECK(tf32_for_convolutions(Tf32Mode::pytorch_default));
  CHECK_FALSE(tf32_for_gemm(Tf32Mode::pytorch_default));
  CHECK(tf32_for_convolutions(Tf32Mode::on));
  CHECK(tf32_for_gemm(Tf32Mode::on));
  CHECK_FALSE(tf32_for_convolutions(Tf32Mode::off));
  CHECK_FALSE(tf32_for_gemm(Tf32Mode::off));
  for (Tf32Mode m : {Tf32Mode::pytorch_default, Tf32Mode::on, Tf32Mode::off})
    CHECK(parse_tf32_mode(tf32_mode_name(m)) == m);
}
