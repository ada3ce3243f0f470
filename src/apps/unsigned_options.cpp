// A negative number given to a flag that takes a count (--max-steps -1) wraps
// around in an unsigned variable, or fails with a message about doubles; it is
// refused here instead, naming the flag and the range it takes.
#include <string>

#include "apps/command.h"

namespace ringtrain::apps {

namespace {

// The range a count option takes, from its validator's description.
std::string allowed_range(const std::string& description) {
  if (description == "POSITIVE") return "a whole number >= 1";
  if (description == "NONNEGATIVE" || description.empty()) return "a whole number >= 0";
  const auto open = description.find('[');
  if (open != std::string::npos) return "a whole number in " + description.substr(open);
  return "a whole number >= 0 (" + description + ")";
}

std::string refuse_negative(const std::string& value, const std::string& range) {
  if (!value.empty() && value[0] == '-') return "'" + value + "' is negative: it takes " + range;
  return {};
}

}  // namespace

void refuse_negative_counts(CLI::App& app) {
  for (CLI::Option* opt : app.get_options()) {
    if (opt->get_type_name().rfind("UINT", 0) != 0) continue;
    bool wrapped = false;
    for (int i = 0;; ++i) {
      CLI::Validator* v = nullptr;
      try {
        v = opt->get_validator(i);
      } catch (const CLI::OptionNotFound&) {
        break;
      }
      // The option's own validator runs after the sign check, with its own words.
      const CLI::Validator original = *v;
      const bool positive = original.get_description() == "POSITIVE";
      const std::string range = allowed_range(original.get_description());
      v->operation([original, range, positive](std::string& value) {
        std::string problem = refuse_negative(value, range);
        // CLI's own words for 0 here would be a range of doubles.
        if (problem.empty() && positive && value.find_first_not_of('0') == std::string::npos)
          problem = "'" + value + "' is not allowed: it takes " + range;
        return problem.empty() ? original(value) : problem;
      });
      wrapped = true;
    }
    if (!wrapped)
      opt->check(CLI::Validator(
          [](std::string& value) { return refuse_negative(value, allowed_range("")); }, "", ""));
  }
  for (CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; }))
    refuse_negative_counts(*sub);
}

}  // namespace ringtrain::apps
