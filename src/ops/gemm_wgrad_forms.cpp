#include "ops/gemm_wgrad_forms.h"

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

bool gemm_wgrad_form_aligned(const ConvGraphShape& shape, GemmWgradForm form) {
  return shape.k % 8 == 0 && (form == GemmWgradForm::unfolded_input || shape.c % 8 == 0);
}

}  // namespace ringtrain::detail
