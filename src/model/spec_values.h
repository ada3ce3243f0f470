// The values of a model spec's arguments, checked where they are read: the
// parser and the built-in layer types (model/builtin_layers.cpp) share them,
// so that every message names the value, what it is for and its line:column.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <utility>

namespace ringtrain {

// Throws Error "model spec: <message>".
[[noreturn]] void spec_fail(const std::string& message);

std::size_t parse_count(std::string_view token, std::string_view what, const std::string& where,
                        bool allow_zero);
// In [0, 1).
double parse_probability(std::string_view token, std::string_view what, const std::string& where);
// In [lo, hi].
double parse_real(std::string_view token, std::string_view what, const std::string& where,
                  double lo, double hi);
// 0/1, false/true.
bool parse_flag(std::string_view token, std::string_view what, const std::string& where);
// "7" -> (7, kSquare); "1x7" -> (1, 7): a size along the height and the width.
std::pair<std::size_t, std::size_t> parse_pair(std::string_view token, std::string_view what,
                                               const std::string& where, bool allow_zero);
// The canonical text of such a pair: "7", "1x7".
std::string pair_text(std::size_t h, std::size_t w);

}  // namespace ringtrain
