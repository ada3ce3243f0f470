#include "ringtrain/ops/math_mode.h"

#include "ringtrain/core/check.h"

namespace ringtrain {

Tf32Mode parse_tf32_mode(std::string_view text) {
  if (text == "default") return Tf32Mode::pytorch_default;
  if (text == "on") return Tf32Mode::on;
  if (text == "off") return Tf32Mode::off;
  RT_CHECK(false, "--tf32: unknown value '{}' (expected on, off or default)", text);
  __builtin_unreachable();
}

const char* tf32_mode_name(Tf32Mode m) {
  switch (m) {
    case Tf32Mode::on:
      return "on";
    case Tf32Mode::off:
      return "off";
    case Tf32Mode::pytorch_default:
      break;
  }
  return "default";
}

const char* tf32_mode_summary(Tf32Mode m) {
  switch (m) {
    case Tf32Mode::on:
      return "conv tf32, gemm tf32";
    case Tf32Mode::off:
      return "conv fp32, gemm fp32";
    case Tf32Mode::pytorch_default:
      break;
  }
  return "conv tf32, gemm fp32";
}

}  // namespace ringtrain
