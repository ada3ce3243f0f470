#include "ops/gemm_wgrad_forms.h"

#include <fmt/format.h>

#include "ops/shifted_gemm_wgrad.h"
#include "ops/unfolded_gemm_wgrad.h"

namespace ringtrain::detail {

std::vector<GemmWgradForm> gemm_wgrad_forms(const ConvGraphShape& shape, std::string* why_not) {
  std::string why_shifted, why_unfolded;
  const auto shifted = plan_shifted_wgrad(shape, kShiftedWgradWorkspaceCap, &why_shifted);
  const bool unfolded =
      plan_unfolded_wgrad(shape, kShiftedWgradWorkspaceCap, &why_unfolded).has_value();
  std::vector<GemmWgradForm> forms;
  if (shifted && (shifted->in_place || !unfolded)) {
    forms = {GemmWgradForm::shifted_rows};
  } else if (shifted) {
    forms = shape.c % 8 == 0
                ? std::vector{GemmWgradForm::shifted_rows, GemmWgradForm::unfolded_input}
                : std::vector{GemmWgradForm::unfolded_input, GemmWgradForm::shifted_rows};
  } else if (unfolded) {
    forms = {GemmWgradForm::unfolded_input};
  } else {
    *why_not = why_shifted == why_unfolded ? why_shifted : why_shifted + "; " + why_unfolded;
  }
  return forms;
}

std::string gemm_wgrad_engine_name(GemmWgradForm form, const ConvGraphShape& shape, bool in_place,
                                   std::size_t cap, int rank) {
  const std::string algo = rank == 0 ? std::string() : fmt::format("-algo{}", rank);
  if (in_place) return "cublasLt-gemm" + algo;
  constexpr std::size_t kMiB = std::size_t{1} << 20;
  const std::string capped =
      cap >= kMiB && cap % kMiB == 0 ? fmt::format("{}MiB", cap / kMiB) : fmt::format("{}B", cap);
  return fmt::format("cublasLt-{}-gemm-{}x{}-{}{}",
                     form == GemmWgradForm::shifted_rows ? "shifted" : "unfolded", shape.r, shape.s,
                     capped, algo);
}

bool names_gemm_wgrad(const std::string& engine) {
  return engine.starts_with("cublasLt-");
}

std::string gemm_wgrad_first_rank(const std::string& name) {
  const std::size_t at = name.find("-algo");
  if (!names_gemm_wgrad(name) || at == std::string::npos || at + 5 >= name.size() ||
      name[at + 5] < '0' || name[at + 5] > '9')
    return name;
  const std::size_t end = name.find_first_not_of("0123456789", at + 5);
  return name.substr(0, at) + (end == std::string::npos ? std::string() : name.substr(end));
}

bool gemm_wgrad_form_aligned(const ConvGraphShape& shape, GemmWgradForm form) {
  return shape.k % 8 == 0 && (form == GemmWgradForm::unfolded_input || shape.c % 8 == 0);
}

}  // namespace ringtrain::detail
