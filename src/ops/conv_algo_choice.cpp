#include "ops/conv_algo_choice.h"

#include <cmath>

#include <fmt/format.h>

namespace ringtrain::detail {

namespace {

std::string gib(std::size_t bytes) {
  return fmt::format("{:.1f} GiB", static_cast<double>(bytes) / (1 << 30));
}

// Why `r` fails the rules, or "" if it passes.
std::string rejection(const ConvAlgoRecord& r, const ConvAlgoRules& rules) {
  if (!r.success) return "not supported";
  if (r.memory > rules.workspace_limit)
    return fmt::format("workspace {} over {}", gib(r.memory), gib(rules.workspace_limit));
  if (rules.require_deterministic && !r.deterministic) return "nondeterministic";
  if (r.math == ConvAlgoMath::tensor_down_conversion) return "down-converts to half";
  if (r.math == ConvAlgoMath::tensor && !rules.allow_tf32) return "TF32 (off)";
  if (!std::isfinite(r.time_ms) || r.time_ms < 0) return "no time";
  return {};
}

}  // namespace

std::optional<std::size_t> choose_conv_algorithm(std::span<const ConvAlgoRecord> records,
                                                 const ConvAlgoRules& rules) {
  std::optional<std::size_t> best;
  for (std::size_t i = 0; i < records.size(); ++i) {
    const ConvAlgoRecord& r = records[i];
    if (!rejection(r, rules).empty()) continue;
    if (!best || r.time_ms < records[*best].time_ms) best = i;
  }
  return best;
}

std::vector<std::size_t> conv_algorithms_to_time(ConvAlgoOp op,
                                                 std::span<const ConvAlgoRecord> records,
                                                 const ConvAlgoRules& rules,
                                                 bool transforms_first_only) {
  std::vector<std::size_t> out;
  for (std::size_t r = 0; r < records.size(); ++r) {
    if (!rejection(records[r], rules).empty()) continue;
    const std::string name = conv_algo_name(op, records[r].algo);
    const bool transform =
        name.find("FFT") != std::string::npos || name.find("WINOGRAD") != std::string::npos;
    if (transforms_first_only && transform && !out.empty()) continue;
    out.push_back(r);
  }
  return out;
}

std::string describe_passed_over(ConvAlgoOp op, std::span<const ConvAlgoRecord> records,
                                 std::size_t pick, const ConvAlgoRules& rules) {
  std::string out;
  if (pick >= records.size()) return out;
  const float chosen = records[pick].time_ms;
  for (std::size_t i = 0; i < records.size(); ++i) {
    const ConvAlgoRecord& r = records[i];
    const bool ahead =
        std::isfinite(r.time_ms) && (r.time_ms < chosen || (r.time_ms == chosen && i < pick));
    if (i == pick || !ahead) continue;
    const std::string why = rejection(r, rules);
    if (why.empty()) continue;  // cannot happen for the rules' own pick
    if (!out.empty()) out += "; ";
    out += fmt::format("{} {}", conv_algo_name(op, r.algo), why);
  }
  return out;
}

std::string describe_conv_algorithms(std::span<const ConvAlgoRecord> records) {
  std::string out;
  for (const ConvAlgoRecord& r : records) {
    if (!out.empty()) out += "; ";
    const char* math = r.math == ConvAlgoMath::fma      ? "fma"
                       : r.math == ConvAlgoMath::tensor ? "tensor"
                                                        : "tensor+half";
    out += fmt::format("algo {} ({}, {}, {}, {:.1f} KiB, {:.3f} ms)", r.algo,
                       r.success ? "ok" : "failed",
                       r.deterministic ? "deterministic" : "nondeterministic", math,
                       static_cast<double>(r.memory) / 1024.0, static_cast<double>(r.time_ms));
  }
  return out.empty() ? "none returned" : out;
}

std::string conv_algo_name(ConvAlgoOp op, int algo) {
  // cudnnConvolutionFwdAlgo_t, cudnnConvolutionBwdFilterAlgo_t and
  // cudnnConvolutionBwdDataAlgo_t, in their enum order.
  static constexpr const char* kForward[] = {
      "IMPLICIT_GEMM", "IMPLICIT_PRECOMP_GEMM", "GEMM", "DIRECT", "FFT", "FFT_TILING",
      "WINOGRAD",      "WINOGRAD_NONFUSED"};
  static constexpr const char* kFilter[] = {
      "ALGO_0", "ALGO_1", "FFT", "ALGO_3", "WINOGRAD", "WINOGRAD_NONFUSED", "FFT_TILING"};
  static constexpr const char* kData[] = {"ALGO_0",     "ALGO_1",   "FFT",
                                          "FFT_TILING", "WINOGRAD", "WINOGRAD_NONFUSED"};
  std::span<const char* const> names;
  switch (op) {
    case ConvAlgoOp::forward:
      names = kForward;
      break;
    case ConvAlgoOp::backward_filter:
      names = kFilter;
      break;
    case ConvAlgoOp::backward_data:
      names = kData;
      break;
  }
  if (algo >= 0 && static_cast<std::size_t>(algo) < names.size())
    return names[static_cast<std::size_t>(algo)];
  return fmt::format("algo {}", algo);
}

std::string describe_conv_choice(ConvAlgoOp op, int algo, ConvAlgoMath math,
                                 std::size_t workspace_bytes) {
  const char* m = math == ConvAlgoMath::fma      ? "fma"
                  : math == ConvAlgoMath::tensor ? "tensor"
                                                 : "tensor+half";
  const auto bytes = static_cast<double>(workspace_bytes);
  const std::string ws =
      workspace_bytes < 1024 ? fmt::format("{}B", workspace_bytes)
      : workspace_bytes < (std::size_t{1} << 20)
          ? fmt::format("{:.1f}KiB", bytes / 1024)
          : fmt::format("{:.{}f}MiB", bytes / (1 << 20), bytes < 10 << 20 ? 2 : 0);
  return fmt::format("{} {} ws={}", conv_algo_name(op, algo), m, ws);
}

}  // namespace ringtrain::detail
