// `ringtrain doctor`: diagnoses after the fact. `doctor flight DIR` reads the
// flight records a job left (see flight_recorder.h; also after a job killed by
// the scheduler) and prints the same verdict the job printed, and a table of
// every rank's phase and last collectives. A job that printed a verdict left it
// in verdict.txt; a job killed before any rank could (by the scheduler, or a
// kill -9 that made the launcher end it) gets one from the records alone.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>

#include "apps/command.h"
#include "ringtrain/comm/flight_verdict.h"
#include "ringtrain/core/check.h"

namespace ringtrain::apps {
namespace {

struct DoctorFlightOptions {
  std::string dir;
  std::size_t last = 3;
};

int run_doctor_flight(const DoctorFlightOptions& o, const Topology& topo) {
  RT_CHECK(topo.world_size() == 1, "doctor runs on one rank; start it without mpirun, not on {}",
           topo.world_size());
  // The newest job's records; files an earlier job left in the same directory
  // (more ranks, the same --logdir) would name ranks this job never had.
  const FlightJob job = select_job(read_flight_dir(o.dir));
  const std::vector<FlightState>& ranks = job.ranks;
  std::printf("job: %s, %d rank(s)\n", job.job.empty() ? "(not recorded)" : job.job.c_str(),
              ranks.front().world_size);
  if (!job.stale.empty()) {
    std::vector<int> stale;
    for (const auto& s : job.stale) stale.push_back(s.rank);
    std::printf("ignored: the records of rank%s %s, left by another job (%s)\n",
                stale.size() > 1 ? "s" : "", format_rank_list(stale).c_str(),
                job.stale.front().job.empty() ? "not recorded" : job.stale.front().job.c_str());
  }
  // The job's last moment: the newest record any rank wrote.
  double end = 0;
  for (const auto& s : ranks) end = std::max(end, s.written);
  const std::string from_files = flight_verdict(ranks, end, /*live=*/false);
  // The verdict the job printed, when one did, was taken while the ranks were
  // still there to look at (a stopped rank is resumed once the job aborts and
  // then overwrites its record): it comes first, if it is this job's.
  std::string said, said_job;
  if (std::ifstream in(std::filesystem::path(o.dir) / "verdict.txt"); in) {
    std::getline(in, said);
    std::getline(in, said_job);
  }
  if (said_job.rfind("job: ", 0) == 0 && said_job.substr(5) != job.job) said.clear();
  if (said.empty()) {
    std::printf("verdict: %s\n", from_files.c_str());
  } else {
    std::printf("verdict: %s\n", said.c_str());
    if (said != from_files) std::printf("from the records as left: %s\n", from_files.c_str());
  }
  std::printf("\n%s", flight_table(ranks, end, o.last).c_str());
  std::fflush(stdout);
  return 0;
}

CLI::App* add_doctor(CLI::App& app, CommandContext&) {
  CLI::App* sub = app.add_subcommand("doctor", "Diagnose a job after the fact (flight records)");
  sub->require_subcommand(1);
  return sub;
}

CLI::App* add_doctor_flight(CLI::App& parent, CommandContext& ctx) {
  auto o = std::make_shared<DoctorFlightOptions>();
  CLI::App* sub = parent.add_subcommand(
      "flight",
      "Read a job's flight records (<logdir>/flight or --flight-dir) and say which rank was "
      "stuck or lost, in which phase, and what the others were waiting on");
  sub->add_option("dir", o->dir, "The flight directory")->required();
  sub->add_option("--last", o->last, "Collectives shown per rank")->capture_default_str();
  sub->parse_complete_callback([&ctx, o] {
    ctx.topology.device = DeviceRequest::cpu;
    ctx.action = [o](const Topology& t) { return run_doctor_flight(*o, t); };
  });
  return sub;
}

}  // namespace
}  // namespace ringtrain::apps

RINGTRAIN_REGISTER_COMMAND("", "doctor", 60, ringtrain::apps::add_doctor)
RINGTRAIN_REGISTER_COMMAND("doctor", "flight", 10, ringtrain::apps::add_doctor_flight)
