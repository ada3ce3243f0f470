// The fault plan (RINGTRAIN_FAULT_*): empty without the variables, each
// variable parsed, and a bad value or name an error that names the variable.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "core/fault_plan.h"
#include "ringtrain/core/error.h"

extern char** environ;

using namespace ringtrain;
using Vars = std::map<std::string, std::string>;

namespace {

// The message of the Error parse(vars) throws ("" when it does not throw).
std::string parse_error(const Vars& vars) {
  try {
    FaultPlan::parse(vars);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("no RINGTRAIN_FAULT_* variable: nothing planned, the hooks are null") {
  // The process's plan is parsed on the first call: clear the environment of
  // any fault a caller of the test left set.
  std::vector<std::string> names;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string entry(*e);
    if (entry.rfind("RINGTRAIN_FAULT_", 0) == 0) names.push_back(entry.substr(0, entry.find('=')));
  }
  for (const std::string& name : names) unsetenv(name.c_str());
  CHECK(FaultPlan::planned() == nullptr);
  CHECK(FaultPlan::parse({}).empty());
}

TEST_CASE("the NaN fault: rank, first step, count, loss or gradient") {
  const FaultPlan defaults = FaultPlan::parse({{"RINGTRAIN_FAULT_NAN_RANK", "1"}});
  REQUIRE(defaults.nonfinite);
  CHECK(defaults.nonfinite->rank == 1);
  CHECK(defaults.nonfinite->first_step == 1);
  CHECK(defaults.nonfinite->steps == 1);
  CHECK_FALSE(defaults.nonfinite->in_loss);

  const FaultPlan plan = FaultPlan::parse({{"RINGTRAIN_FAULT_NAN_RANK", "2"},
                                           {"RINGTRAIN_FAULT_NAN_STEP", "3"},
                                           {"RINGTRAIN_FAULT_NAN_COUNT", "2"},
                                           {"RINGTRAIN_FAULT_NAN_WHAT", "loss"}});
  REQUIRE(plan.nonfinite);
  CHECK(plan.nonfinite->in_loss);
  CHECK_FALSE(plan.nonfinite->at(2, 2));
  CHECK(plan.nonfinite->at(2, 3));
  CHECK(plan.nonfinite->at(2, 4));
  CHECK_FALSE(plan.nonfinite->at(2, 5));
  CHECK_FALSE(plan.nonfinite->at(1, 3));
  CHECK_FALSE(FaultPlan::parse(
                  {{"RINGTRAIN_FAULT_NAN_RANK", "0"}, {"RINGTRAIN_FAULT_NAN_WHAT", "gradient"}})
                  .nonfinite->in_loss);
  // Without the rank the other NaN variables plant nothing (scripts unset
  // the rank to end the fault).
  CHECK(FaultPlan::parse({{"RINGTRAIN_FAULT_NAN_STEP", "3"}, {"RINGTRAIN_FAULT_NAN_COUNT", "1"}})
            .empty());
}

TEST_CASE("the divergence, step delay, stall and late NCCL join faults") {
  CHECK(FaultPlan::parse({{"RINGTRAIN_FAULT_DIVERGE_RANK", "1"}}).diverge_rank == 1);
  CHECK(FaultPlan::parse({{"RINGTRAIN_FAULT_STEP_DELAY_MS", "30"}}).step_delay_ms == 30);
  CHECK(FaultPlan::parse({{"RINGTRAIN_FAULT_STEP_DELAY_MS", "0"}}).empty());

  const FaultPlan any_step = FaultPlan::parse(
      {{"RINGTRAIN_FAULT_STALL_RANK", "1"}, {"RINGTRAIN_FAULT_STALL_PHASE", "all-reduce wait"}});
  REQUIRE(any_step.stall);
  CHECK(any_step.stall->rank == 1);
  CHECK(any_step.stall->phase == "all-reduce wait");
  CHECK_FALSE(any_step.stall->step);
  CHECK(any_step.stall->seconds == 3600);
  const FaultPlan stall = FaultPlan::parse({{"RINGTRAIN_FAULT_STALL_RANK", "3"},
                                            {"RINGTRAIN_FAULT_STALL_PHASE", "data"},
                                            {"RINGTRAIN_FAULT_STALL_STEP", "4"},
                                            {"RINGTRAIN_FAULT_STALL_SECONDS", "0.03"}});
  REQUIRE(stall.stall);
  CHECK(stall.stall->step == 4u);
  CHECK(stall.stall->seconds == Approx(0.03));
  CHECK(FaultPlan::parse({{"RINGTRAIN_FAULT_STALL_SECONDS", "0.03"}}).empty());

  const FaultPlan late = FaultPlan::parse(
      {{"RINGTRAIN_FAULT_NCCL_LATE_RANK", "1"}, {"RINGTRAIN_FAULT_NCCL_LATE_SECONDS", "20"}});
  REQUIRE(late.nccl_late);
  CHECK(late.nccl_late->rank == 1);
  CHECK(late.nccl_late->seconds == 20);
  CHECK(FaultPlan::parse({{"RINGTRAIN_FAULT_NCCL_LATE_RANK", "0"}}).nccl_late->seconds == 600);
}

TEST_CASE("a stall sleeps only at its rank, point and step") {
  const FaultPlan plan = FaultPlan::parse({{"RINGTRAIN_FAULT_STALL_RANK", "1"},
                                           {"RINGTRAIN_FAULT_STALL_PHASE", "forward"},
                                           {"RINGTRAIN_FAULT_STALL_STEP", "2"},
                                           {"RINGTRAIN_FAULT_STALL_SECONDS", "0.2"}});
  // Where it stalls is decided without a clock (a busy machine cannot make a
  // point that does not stall look like one that does) ...
  CHECK_FALSE(plan.stalls_at("forward", 0, 2));
  CHECK_FALSE(plan.stalls_at("backward", 1, 2));
  CHECK_FALSE(plan.stalls_at("forward", 1, 3));
  CHECK(plan.stalls_at("forward", 1, 2));
  // ... and so is how long it sleeps: the sleeper records what it was asked
  // for, and only the stalling point asks.
  std::vector<double> asked;
  const FaultPlan::Sleeper record = [&asked](double seconds) { asked.push_back(seconds); };
  plan.stall_at("forward", 0, 2, record);
  plan.stall_at("backward", 1, 2, record);
  plan.stall_at("forward", 1, 3, record);
  CHECK(asked.empty());
  plan.stall_at("forward", 1, 2, record);
  REQUIRE(asked.size() == 1);
  CHECK(asked[0] == Approx(0.2));
}

TEST_CASE("a bad fault value or name is an error naming the variable") {
  const auto error_of = [](const char* name, const char* value) {
    Vars vars{{name, value}};
    // Beside the bad value, a valid plan: the error is the value's alone.
    vars.emplace("RINGTRAIN_FAULT_NAN_RANK", "0");
    return parse_error(vars);
  };
  CHECK_THAT(error_of("RINGTRAIN_FAULT_NAN_RANK", "one"),
             Catch::Contains("RINGTRAIN_FAULT_NAN_RANK='one': expected a whole number"));
  CHECK_THAT(error_of("RINGTRAIN_FAULT_NAN_RANK", "-1"),
             Catch::Contains("RINGTRAIN_FAULT_NAN_RANK='-1': expected a whole number"));
  CHECK_THAT(error_of("RINGTRAIN_FAULT_NAN_STEP", "0"),
             Catch::Contains("RINGTRAIN_FAULT_NAN_STEP='0': expected a whole number, at least 1"));
  CHECK_THAT(error_of("RINGTRAIN_FAULT_NAN_COUNT", "2x"),
             Catch::Contains("RINGTRAIN_FAULT_NAN_COUNT='2x'"));
  CHECK_THAT(error_of("RINGTRAIN_FAULT_NAN_WHAT", "weights"),
             Catch::Contains("RINGTRAIN_FAULT_NAN_WHAT='weights': expected loss or gradient"));
  CHECK_THAT(error_of("RINGTRAIN_FAULT_DIVERGE_RANK", ""),
             Catch::Contains("RINGTRAIN_FAULT_DIVERGE_RANK=''"));
  CHECK_THAT(error_of("RINGTRAIN_FAULT_STEP_DELAY_MS", "1.5"),
             Catch::Contains("RINGTRAIN_FAULT_STEP_DELAY_MS='1.5'"));
  CHECK_THAT(error_of("RINGTRAIN_FAULT_STALL_SECONDS", "-3"),
             Catch::Contains("RINGTRAIN_FAULT_STALL_SECONDS='-3': expected a number of seconds"));
  CHECK_THAT(error_of("RINGTRAIN_FAULT_NCCL_LATE_SECONDS", "inf"),
             Catch::Contains("RINGTRAIN_FAULT_NCCL_LATE_SECONDS='inf'"));
  CHECK_THAT(
      parse_error({{"RINGTRAIN_FAULT_STALL_RANK", "1"}, {"RINGTRAIN_FAULT_STALL_PHASE", "fwd"}}),
      Catch::Contains("RINGTRAIN_FAULT_STALL_PHASE='fwd': no such point; expected one of open, "
                      "data, forward, backward, all-reduce wait, optimizer"));
  CHECK_THAT(parse_error({{"RINGTRAIN_FAULT_STALL_RANK", "1"}}),
             Catch::Contains("only RINGTRAIN_FAULT_STALL_RANK is set"));
  CHECK_THAT(parse_error({{"RINGTRAIN_FAULT_NAN_RNAK", "1"}}),
             Catch::Contains("RINGTRAIN_FAULT_NAN_RNAK=1: no such fault"));
}
