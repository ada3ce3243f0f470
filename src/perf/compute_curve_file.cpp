#include "ringtrain/perf/compute_curve_file.h"

#include <fstream>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "ringtrain/core/check.h"
#include "ringtrain/core/error.h"

namespace ringtrain {

LoadedComputeCurve read_compute_curve_file(const std::string& path) {
  std::ifstream in(path);
  RT_CHECK(in.good(), "--compute-curve {}: cannot open the file", path);
  std::vector<ComputePoint> points;
  std::string model, line;
  for (int number = 1; std::getline(in, line); ++number) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(line);
    } catch (const nlohmann::json::exception& e) {
      throw Error(fmt::format("--compute-curve {} line {}: not JSON ({})", path, number, e.what()));
    }
    RT_CHECK(j.is_object() && j.contains("batch") && j["batch"].is_number() &&
                 j.contains("step_ms") && j["step_ms"].is_number(),
             "--compute-curve {} line {}: expected an object of 'ringtrain bench step --json' "
             "with numbers 'batch' and 'step_ms'",
             path, number);
    const std::string m = j.value("model", std::string());
    RT_CHECK(points.empty() || m == model,
             "--compute-curve {} line {}: model '{}', but earlier lines measured '{}'", path,
             number, m, model);
    model = m;
    // Several ranks at once on one machine: what a synchronous step of them
    // takes (the slowest rank's time, or with more ranks than cores their mean
    // rate's); files from before that was recorded have the slowest rank's.
    const char* time_key = j.contains("step_ms_synchronous")    ? "step_ms_synchronous"
                           : j.contains("step_ms_slowest_rank") ? "step_ms_slowest_rank"
                                                                : "step_ms";
    RT_CHECK(j[time_key].is_number(), "--compute-curve {} line {}: '{}' is not a number", path,
             number, time_key);
    const int colocated = j.value("ranks_per_host", 1);
    double slowdown = 0;
    if (colocated > 1 && j.contains("slowdown_beside")) {
      RT_CHECK(j["slowdown_beside"].is_number() && j["slowdown_beside"].get<double>() > 0,
               "--compute-curve {} line {}: 'slowdown_beside' is not a positive number", path,
               number);
      slowdown = j["slowdown_beside"].get<double>();
    }
    points.push_back(
        {j["batch"].get<double>(), j[time_key].get<double>() * 1e-3, colocated, slowdown});
  }
  try {
    return {ComputeCurve(std::move(points)), model};
  } catch (const Error& e) {
    throw Error(fmt::format("--compute-curve {}: {}", path, e.what()));
  }
}

}  // namespace ringtrain
