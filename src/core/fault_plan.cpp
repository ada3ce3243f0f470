#include "core/fault_plan.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <thread>

#include <fmt/format.h>

#include "ringtrain/core/check.h"
#include "ringtrain/core/input_error.h"

extern char** environ;

namespace ringtrain {

namespace {

constexpr std::string_view kPrefix = "RINGTRAIN_FAULT_";

constexpr std::array<std::string_view, 12> kVariables = {
    "RINGTRAIN_FAULT_NAN_RANK",       "RINGTRAIN_FAULT_NAN_STEP",
    "RINGTRAIN_FAULT_NAN_COUNT",      "RINGTRAIN_FAULT_NAN_WHAT",
    "RINGTRAIN_FAULT_DIVERGE_RANK",   "RINGTRAIN_FAULT_STEP_DELAY_MS",
    "RINGTRAIN_FAULT_STALL_RANK",     "RINGTRAIN_FAULT_STALL_PHASE",
    "RINGTRAIN_FAULT_STALL_STEP",     "RINGTRAIN_FAULT_STALL_SECONDS",
    "RINGTRAIN_FAULT_NCCL_LATE_RANK", "RINGTRAIN_FAULT_NCCL_LATE_SECONDS"};

// The points where the trainer and the data set call stall_at().
constexpr std::array<std::string_view, 6> kStallPoints = {
    "open", "data", "forward", "backward", "all-reduce wait", "optimizer"};

class Variables {
 public:
  explicit Variables(const std::map<std::string, std::string>& vars) : vars_(vars) {}

  const std::string* find(const char* name) const {
    const auto it = vars_.find(name);
    return it == vars_.end() ? nullptr : &it->second;
  }

  std::uint64_t whole_number(const char* name, std::uint64_t fallback,
                             std::uint64_t at_least = 0) const {
    const std::string* text = find(name);
    if (text == nullptr) return fallback;
    std::uint64_t value = 0;
    const char* end = text->data() + text->size();
    const auto [ptr, ec] = std::from_chars(text->data(), end, value);
    RT_CHECK(ec == std::errc() && ptr == end && !text->empty() && value >= at_least,
             "{}='{}': expected a whole number{} (a test's fault injection)", name, *text,
             at_least > 0 ? fmt::format(", at least {}", at_least) : std::string(", 0 or more"));
    return value;
  }

  std::optional<int> rank(const char* name) const {
    if (find(name) == nullptr) return std::nullopt;
    const std::uint64_t r = whole_number(name, 0);
    RT_CHECK(r <= static_cast<std::uint64_t>(std::numeric_limits<int>::max()),
             "{}={}: not a rank (a test's fault injection)", name, r);
    return static_cast<int>(r);
  }

  double seconds(const char* name, double fallback) const {
    const std::string* text = find(name);
    if (text == nullptr) return fallback;
    char* end = nullptr;
    const double value = std::strtod(text->c_str(), &end);
    RT_CHECK(
        !text->empty() && end == text->c_str() + text->size() && std::isfinite(value) && value >= 0,
        "{}='{}': expected a number of seconds, 0 or more (a test's fault injection)", name, *text);
    return value;
  }

 private:
  const std::map<std::string, std::string>& vars_;
};

std::map<std::string, std::string> fault_variables_of_environment() {
  std::map<std::string, std::string> vars;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    const std::string_view entry(*e);
    const std::size_t eq = entry.find('=');
    if (eq == std::string_view::npos || entry.substr(0, kPrefix.size()) != kPrefix) continue;
    vars.emplace(std::string(entry.substr(0, eq)), std::string(entry.substr(eq + 1)));
  }
  return vars;
}

std::string joined(const auto& names) {
  std::string out;
  for (std::string_view n : names) {
    if (!out.empty()) out += ", ";
    out += n;
  }
  return out;
}

}  // namespace

FaultPlan FaultPlan::parse(const std::map<std::string, std::string>& vars) {
  for (const auto& [name, value] : vars)
    RT_CHECK(std::find(kVariables.begin(), kVariables.end(), name) != kVariables.end(),
             "{}={}: no such fault (a misspelt name would plant none); the fault variables are {}",
             name, value, joined(kVariables));
  const Variables v(vars);
  FaultPlan plan;
  // Every value given is checked, even where its fault is not planned.
  const std::uint64_t nan_step = v.whole_number("RINGTRAIN_FAULT_NAN_STEP", 1, 1);
  const std::uint64_t nan_count = v.whole_number("RINGTRAIN_FAULT_NAN_COUNT", 1, 1);
  bool nan_in_loss = false;
  if (const std::string* what = v.find("RINGTRAIN_FAULT_NAN_WHAT")) {
    RT_CHECK(*what == "loss" || *what == "gradient",
             "RINGTRAIN_FAULT_NAN_WHAT='{}': expected loss or gradient (a test's fault injection)",
             *what);
    nan_in_loss = *what == "loss";
  }
  if (const auto rank = v.rank("RINGTRAIN_FAULT_NAN_RANK"))
    plan.nonfinite = NonfiniteFault{*rank, nan_step, nan_count, nan_in_loss};

  plan.diverge_rank = v.rank("RINGTRAIN_FAULT_DIVERGE_RANK");
  plan.step_delay_ms = v.whole_number("RINGTRAIN_FAULT_STEP_DELAY_MS", 0);

  const auto stall_rank = v.rank("RINGTRAIN_FAULT_STALL_RANK");
  const std::string* stall_phase = v.find("RINGTRAIN_FAULT_STALL_PHASE");
  std::optional<std::uint64_t> stall_step;
  if (v.find("RINGTRAIN_FAULT_STALL_STEP") != nullptr)
    stall_step = v.whole_number("RINGTRAIN_FAULT_STALL_STEP", 0);
  const double stall_seconds = v.seconds("RINGTRAIN_FAULT_STALL_SECONDS", 3600);
  if (stall_phase != nullptr)
    RT_CHECK(
        std::find(kStallPoints.begin(), kStallPoints.end(), *stall_phase) != kStallPoints.end(),
        "RINGTRAIN_FAULT_STALL_PHASE='{}': no such point; expected one of {} (a test's fault "
        "injection)",
        *stall_phase, joined(kStallPoints));
  RT_CHECK(stall_rank.has_value() == (stall_phase != nullptr),
           "RINGTRAIN_FAULT_STALL_RANK and RINGTRAIN_FAULT_STALL_PHASE plant a stall together: "
           "only {} is set",
           stall_rank ? "RINGTRAIN_FAULT_STALL_RANK" : "RINGTRAIN_FAULT_STALL_PHASE");
  if (stall_rank) plan.stall = StallFault{*stall_rank, *stall_phase, stall_step, stall_seconds};

  const double late_seconds = v.seconds("RINGTRAIN_FAULT_NCCL_LATE_SECONDS", 600);
  if (const auto rank = v.rank("RINGTRAIN_FAULT_NCCL_LATE_RANK"))
    plan.nccl_late = LateJoinFault{*rank, late_seconds};
  return plan;
}

const FaultPlan* FaultPlan::planned() {
  // Parsed once; an initialiser that throws leaves it unparsed, so every
  // caller sees the error.
  static const std::optional<FaultPlan> plan = [] {
    FaultPlan p;
    as_input_error([&] { p = parse(fault_variables_of_environment()); });
    return p.empty() ? std::nullopt : std::optional<FaultPlan>(std::move(p));
  }();
  return plan ? &*plan : nullptr;
}

bool FaultPlan::stalls_at(std::string_view point, int rank, std::uint64_t step) const {
  return stall && stall->rank == rank && stall->phase == point &&
         (!stall->step || *stall->step == step);
}

void FaultPlan::sleep_seconds(double seconds) {
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
}

void FaultPlan::stall_at(std::string_view point, int rank, std::uint64_t step,
                         const Sleeper& sleep) const {
  if (!stalls_at(point, rank, step)) return;
  sleep(stall->seconds);
}

void FaultPlan::delay_nccl_join(int rank) const {
  if (!nccl_late || nccl_late->rank != rank) return;
  std::this_thread::sleep_for(std::chrono::duration<double>(nccl_late->seconds));
}

}  // namespace ringtrain
