// "Did you mean": the known name nearest to what a user typed (a subcommand,
// a flag, a preset), when it is near enough to be a typo of it.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ringtrain {

// The candidate with the smallest edit distance to `typed` (case-insensitive),
// if that distance is at most a third of the longer name (at least 1, at
// most 3), or the candidate begins with `typed` (or with all of it but its
// last letter: "rotate", "rotation"); nullopt when none is that close.
std::optional<std::string> nearest_name(std::string_view typed,
                                        const std::vector<std::string>& candidates);

// " (did you mean 'train'?)", or "" when no candidate is close.
std::string did_you_mean(std::string_view typed, const std::vector<std::string>& candidates);

}  // namespace ringtrain
