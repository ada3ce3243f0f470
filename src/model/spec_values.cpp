// Values in a model spec's arguments (model/spec_values.h).
#include "model/spec_values.h"

#include <charconv>

#include <fmt/format.h>

#include "ringtrain/core/check.h"
#include "ringtrain/model/model_spec.h"

namespace ringtrain {

namespace {
[[noreturn]] void fail(const std::string& message) {
  spec_fail(message);
}
}  // namespace

void spec_fail(const std::string& message) {
  RT_CHECK(false, "model spec: {}", message);
  __builtin_unreachable();
}

std::size_t parse_count(std::string_view token, std::string_view what, const std::string& where,
                        bool allow_zero) {
  std::size_t v = 0;
  const auto [end, ec] = std::from_chars(token.data(), token.data() + token.size(), v);
  if (ec != std::errc() || end != token.data() + token.size() || token.empty())
    fail(fmt::format("bad value '{}' for {} at {}: expected a whole number", token, what, where));
  if (!allow_zero && v == 0)
    fail(fmt::format("{} must be at least 1, got '{}' at {}", what, token, where));
  return v;
}

double parse_probability(std::string_view token, std::string_view what, const std::string& where) {
  double v = 0;
  const auto [end, ec] = std::from_chars(token.data(), token.data() + token.size(), v);
  if (ec != std::errc() || end != token.data() + token.size() || token.empty())
    fail(fmt::format("bad value '{}' for {} at {}: expected a number", token, what, where));
  if (!(v >= 0.0 && v < 1.0))
    fail(fmt::format("{} must be in [0, 1), got '{}' at {}", what, token, where));
  return v;
}

double parse_real(std::string_view token, std::string_view what, const std::string& where,
                  double lo, double hi) {
  double v = 0;
  const auto [end, ec] = std::from_chars(token.data(), token.data() + token.size(), v);
  if (ec != std::errc() || end != token.data() + token.size() || token.empty())
    fail(fmt::format("bad value '{}' for {} at {}: expected a number", token, what, where));
  if (!(v >= lo && v <= hi))
    fail(fmt::format("{} must be in [{}, {}], got '{}' at {}", what, lo, hi, token, where));
  return v;
}

bool parse_flag(std::string_view token, std::string_view what, const std::string& where) {
  if (token == "1" || token == "true") return true;
  if (token == "0" || token == "false") return false;
  fail(fmt::format("bad value '{}' for {} at {}: expected 0 or 1", token, what, where));
}

// "7" -> (7, kSquare); "1x7" -> (1, 7): a size along the height and the width.
std::pair<std::size_t, std::size_t> parse_pair(std::string_view token, std::string_view what,
                                               const std::string& where, bool allow_zero) {
  const std::size_t x = token.find('x');
  if (x == std::string_view::npos)
    return {parse_count(token, what, where, allow_zero), LayerSpec::kSquare};
  const std::size_t h = parse_count(token.substr(0, x), what, where, allow_zero);
  const std::size_t w = parse_count(token.substr(x + 1), what, where, allow_zero);
  return {h, h == w ? LayerSpec::kSquare : w};
}

std::string pair_text(std::size_t h, std::size_t w) {
  return w == LayerSpec::kSquare ? fmt::format("{}", h) : fmt::format("{}x{}", h, w);
}

}  // namespace ringtrain
