// When CLI11 refuses a command line, the word it stumbled on is often a typo
// of a subcommand or a flag ("ringtrain trian", "--epoch 3"). CLI11 says "A
// subcommand is required" or "The following argument was not expected", which
// hides it. This walks the words as CLI11 would and names the first one that
// is neither, with the nearest known name.
#include <string>
#include <vector>

#include <fmt/format.h>

#include "apps/command.h"
#include "ringtrain/core/nearest_name.h"

namespace ringtrain::apps {

namespace {

std::string command_path(const CLI::App* app) {
  std::string path;
  for (const CLI::App* a = app; a != nullptr; a = a->get_parent())
    path = a->get_parent() == nullptr ? "ringtrain" + path : " " + a->get_name() + path;
  return path;
}

std::vector<std::string> subcommand_names(const CLI::App* app) {
  std::vector<std::string> names;
  for (const CLI::App* sub : app->get_subcommands([](const CLI::App*) { return true; }))
    names.push_back(sub->get_name());
  return names;
}

// Every long and short name of the flags `app` and its parents accept (a
// parent's flags, such as --help, may be given after a subcommand too).
std::vector<std::string> flag_names(const CLI::App* app) {
  std::vector<std::string> names;
  for (const CLI::App* a = app; a != nullptr; a = a->get_parent()) {
    for (const CLI::Option* opt : a->get_options()) {
      for (const std::string& n : opt->get_lnames()) names.push_back("--" + n);
      for (const std::string& n : opt->get_snames()) names.push_back("-" + n);
    }
  }
  return names;
}

const CLI::Option* find_flag(const CLI::App* app, const std::string& name) {
  for (const CLI::App* a = app; a != nullptr; a = a->get_parent())
    if (const CLI::Option* opt = a->get_option_no_throw(name); opt != nullptr) return opt;
  return nullptr;
}

bool takes_positionals(const CLI::App* app) {
  for (const CLI::Option* opt : app->get_options())
    if (opt->get_positional()) return true;
  return false;
}

}  // namespace

std::string command_line_typo(const CLI::App& app, int argc, char** argv) {
  const CLI::App* at = &app;
  for (int i = 1; i < argc; ++i) {
    const std::string word = argv[i];
    if (word == "--") return {};
    if (word.size() > 1 && word[0] == '-' && !(word[1] >= '0' && word[1] <= '9')) {
      const std::string name = word.substr(0, word.find('='));
      const CLI::Option* opt = find_flag(at, name);
      if (opt == nullptr)
        return fmt::format("unknown flag '{}' for '{}'{}\nRun '{} --help' for the flags.", name,
                           command_path(at), did_you_mean(name, flag_names(at)), command_path(at));
      // Its value, when it takes one and it was not written as --flag=value.
      if (opt->get_expected_min() > 0 && word.find('=') == std::string::npos) i += 1;
      continue;
    }
    const std::vector<std::string> subs = subcommand_names(at);
    bool found = false;
    for (const CLI::App* sub : at->get_subcommands([](const CLI::App*) { return true; })) {
      if (sub->check_name(word)) {
        at = sub;
        found = true;
        break;
      }
    }
    if (found) continue;
    if (!subs.empty() && !takes_positionals(at))
      return fmt::format(
          "unknown subcommand '{}' of '{}'{} (subcommands: {})\nRun '{} --help' "
          "for what each does.",
          word, command_path(at), did_you_mean(word, subs), fmt::join(subs, ", "),
          command_path(at));
  }
  return {};
}

}  // namespace ringtrain::apps
