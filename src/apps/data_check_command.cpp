// `ringtrain data check FILE`: reads every split of a dataset and reports, per
// split, its size, shape, dtype and classes, and what is wrong: NaN or Inf
// values (the first one's sample and element), labels out of range, an empty
// split, splits whose shapes or classes differ. Exit 0 when sound, 2 when not.
#include <cstdio>
#include <memory>

#include "apps/command.h"
#include "ringtrain/core/check.h"
#include "ringtrain/data/dataset_check.h"

namespace ringtrain::apps {
namespace {

int run_data_check(const std::string& path, const Topology& topo) {
  RT_CHECK(topo.world_size() == 1,
           "data check runs on one rank; start it without mpirun, not on {}", topo.world_size());
  const DatasetReport report = check_dataset(path);
  std::printf("%s: %zu split(s)\n%s", path.c_str(), report.splits.size(),
              format_dataset_report(report).c_str());
  std::fflush(stdout);
  const std::size_t problems = report.problem_count();
  RT_CHECK(problems == 0, "data check: {} problem(s) in {} (listed above)", problems, path);
  return 0;
}

CLI::App* add_data_check(CLI::App& parent, CommandContext& ctx) {
  auto path = std::make_shared<std::string>();
  CLI::App* sub = parent.add_subcommand(
      "check",
      "Read every split of a dataset and report NaN or Inf values, labels out of range, empty "
      "splits and shapes that differ (exit 2 when any is found)");
  sub->add_option("file", *path, "HDF5 dataset file")->required();
  sub->parse_complete_callback([&ctx, path] {
    ctx.topology.device = DeviceRequest::cpu;
    ctx.action = [path](const Topology& t) { return run_data_check(*path, t); };
  });
  return sub;
}

}  // namespace
}  // namespace ringtrain::apps

RINGTRAIN_REGISTER_COMMAND("data", "check", 20, ringtrain::apps::add_data_check)
