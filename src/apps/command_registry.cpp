#include <algorithm>
#include <map>
#include <vector>

#include "apps/command.h"

namespace ringtrain::apps {

namespace {
std::vector<CommandRegistration>& registry() {
  static std::vector<CommandRegistration> r;
  return r;
}
}  // namespace

bool register_command(CommandRegistration registration) {
  registry().push_back(std::move(registration));
  return true;
}

void build_commands(CLI::App& app, CommandContext& ctx) {
  auto regs = registry();
  // Parents first: a registration's depth is the number of words in its parent.
  std::stable_sort(regs.begin(), regs.end(), [](const auto& a, const auto& b) {
    if (a.parent.empty() != b.parent.empty()) return a.parent.empty();
    return a.order < b.order;
  });
  std::map<std::string, CLI::App*> made;
  for (const auto& r : regs) {
    CLI::App* parent = &app;
    if (!r.parent.empty()) {
      auto it = made.find(r.parent);
      if (it == made.end()) continue;  // a child whose parent is not built: skip
      parent = it->second;
    }
    CLI::App* sub = r.add(*parent, ctx);
    made[r.parent.empty() ? r.name : r.parent + " " + r.name] = sub;
  }
}

}  // namespace ringtrain::apps
