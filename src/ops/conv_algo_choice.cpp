#include "ops/conv_algo_choice.h"

#include <cmath>

#include <fmt/format.h>

namespace ringtrain::detail {

std::optional<std::size_t> choose_conv_algorithm(std::span<const ConvAlgoRecord> records,
                                                 const ConvAlgoRules& rules) {
  std::optional<std::size_t> best;
  for (std::size_t i = 0; i < records.size(); ++i) {
    const ConvAlgoRecord& r = records[i];
    if (!r.success || r.memory > rules.workspace_limit) continue;
    if (rules.require_deterministic && !r.deterministic) continue;
    if (r.math == ConvAlgoMath::tensor_down_conversion) continue;
    if (r.math == ConvAlgoMath::tensor && !rules.allow_tf32) continue;
    if (!std::isfinite(r.time_ms) || r.time_ms < 0) continue;
    if (!best || r.time_ms < records[*best].time_ms) best = i;
  }
  return best;
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

}  // namespace ringtrain::detail
