#include "ringtrain/core/nearest_name.h"

#include <algorithm>
#include <cctype>
#include <limits>

#include <fmt/format.h>

namespace ringtrain {

namespace {

char lower(char c) {
  return static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
}

// Levenshtein distance with adjacent transpositions ("trian" is one edit
// from "train"), case-insensitive.
std::size_t edit_distance(std::string_view a, std::string_view b) {
  const std::size_t n = a.size(), m = b.size();
  std::vector<std::vector<std::size_t>> d(n + 1, std::vector<std::size_t>(m + 1));
  for (std::size_t i = 0; i <= n; ++i) d[i][0] = i;
  for (std::size_t j = 0; j <= m; ++j) d[0][j] = j;
  for (std::size_t i = 1; i <= n; ++i) {
    for (std::size_t j = 1; j <= m; ++j) {
      const std::size_t cost = lower(a[i - 1]) == lower(b[j - 1]) ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && lower(a[i - 1]) == lower(b[j - 2]) &&
          lower(a[i - 2]) == lower(b[j - 1]))
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  }
  return d[n][m];
}

std::size_t common_prefix(std::string_view a, std::string_view b) {
  std::size_t n = 0;
  while (n < a.size() && n < b.size() && lower(a[n]) == lower(b[n])) ++n;
  return n;
}

// "gen" for "generate" (a word cut short), "rotate" for "rotation" (the same
// stem, ended otherwise): the name begins with all of the typed word, or with
// all but its last letter when that is at least 4 letters.
bool begins_like(std::string_view typed, std::string_view name) {
  const std::size_t shared = common_prefix(typed, name);
  if (typed.size() >= 3 && shared == typed.size() && typed.size() < name.size()) return true;
  return shared >= 4 && shared + 1 >= typed.size();
}

}  // namespace

std::optional<std::string> nearest_name(std::string_view typed,
                                        const std::vector<std::string>& candidates) {
  std::optional<std::string> best;
  std::size_t best_distance = std::numeric_limits<std::size_t>::max();
  for (const std::string& name : candidates) {
    const std::size_t distance = edit_distance(typed, name);
    const std::size_t longer = std::max(typed.size(), name.size());
    const std::size_t allowed = std::clamp<std::size_t>(longer / 3, 1, 3);
    const bool close = distance <= allowed || begins_like(typed, name);
    if (close && distance < best_distance) {
      best = name;
      best_distance = distance;
    }
  }
  return best;
}

std::string did_you_mean(std::string_view typed, const std::vector<std::string>& candidates) {
  const auto name = nearest_name(typed, candidates);
  return name ? fmt::format(" (did you mean '{}'?)", *name) : std::string();
}

}  // namespace ringtrain
