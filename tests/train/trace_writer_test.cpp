// Chrome-trace output: valid JSON with the fields viewers need, nested spans
// stay nested, threads can record concurrently, ranks merge onto one time axis.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <thread>

#include "ringtrain/core/error.h"
#include "ringtrain/core/timer.h"
#include "ringtrain/train/trace_writer.h"
#include "tests/support/temp_dir.h"

using namespace ringtrain;
namespace fs = std::filesystem;
using nlohmann::json;
using ringtrain::test::TempDir;

namespace {

std::vector<json> spans(const json& doc) {
  std::vector<json> out;
  for (const auto& e : doc.at("traceEvents"))
    if (e.at("ph") == "X") out.push_back(e);
  return out;
}

const json& find_span(const std::vector<json>& events, const std::string& name, int pid = -1) {
  for (const auto& e : events)
    if (e.at("name") == name && (pid < 0 || e.at("pid") == pid)) return e;
  FAIL("no span named " << name);
  return events.front();
}

bool within(const json& inner, const json& outer) {
  const double is = inner.at("ts"), id = inner.at("dur"), os = outer.at("ts"), od = outer.at("dur");
  return inner.at("pid") == outer.at("pid") && inner.at("tid") == outer.at("tid") && is >= os &&
         is + id <= os + od;
}

void spin_for(double seconds) {
  const double until = monotonic_seconds() + seconds;
  while (monotonic_seconds() < until) {
  }
}

}  // namespace

TEST_CASE("spans serialize as complete events with the fields viewers need") {
  TraceWriter trace(3);
  const double t0 = monotonic_seconds();
  trace.span("forward", "compute", t0 + 0.001, t0 + 0.0035, {{"micro_batch", 0}});
  trace.span("allreduce bucket 2", "comm", t0 + 0.002, t0 + 0.004,
             {{"bucket", 2}, {"bytes", 4096}});
  trace.span("wait", "data", t0, t0);  // zero length is fine
  trace.span("custom", "my lane", t0, t0 + 1e-6);
  CHECK(trace.event_count() == 4);

  const json doc = json::parse(trace.serialize());
  CHECK(doc.at("displayTimeUnit") == "ms");
  CHECK(doc.at("otherData").at("ringtrain_rank") == 3);
  const auto ev = spans(doc);
  REQUIRE(ev.size() == 4);
  for (const auto& e : ev) {
    INFO(e.dump());
    CHECK(e.at("ph") == "X");
    CHECK(e.at("pid") == 3);
    CHECK(e.at("tid").is_number_integer());
    CHECK(e.at("ts").is_number());
    CHECK(e.at("dur").get<double>() >= 0);
    CHECK(e.at("name").is_string());
  }
  const json& fwd = find_span(ev, "forward");
  const json& ar = find_span(ev, "allreduce bucket 2");
  CHECK(fwd.at("dur").get<double>() == Approx(2500).margin(0.002));
  CHECK(ar.at("ts").get<double>() - fwd.at("ts").get<double>() == Approx(1000).margin(0.002));
  CHECK(ar.at("args").at("bytes") == 4096);
  CHECK_FALSE(find_span(ev, "wait").contains("args"));
  CHECK(fwd.at("tid") != ar.at("tid"));

  // Metadata names the rank and every lane used.
  std::map<int, std::string> lane_names;
  bool process_named = false;
  for (const auto& e : doc.at("traceEvents")) {
    if (e.at("ph") != "M") continue;
    if (e.at("name") == "thread_name") lane_names[e.at("tid").get<int>()] = e.at("args").at("name");
    if (e.at("name") == "process_name") process_named = e.at("args").at("name") == "rank 3";
  }
  CHECK(process_named);
  CHECK(lane_names.at(fwd.at("tid").get<int>()) == "compute");
  CHECK(lane_names.at(ar.at("tid").get<int>()) == "comm");
  CHECK(lane_names.size() == 4);

  CHECK_THROWS_AS(trace.span("backwards", "compute", t0 + 1, t0), Error);
  CHECK_THROWS_AS(trace.span("bad args", "compute", t0, t0, json::array({1})), Error);
}

TEST_CASE("RAII scopes nest correctly") {
  TraceWriter trace(0);
  {
    auto step = trace.scope("step", "compute", {{"step", 7}});
    spin_for(0.0002);
    {
      auto fwd = trace.scope("forward", "compute");
      spin_for(0.0003);
      { auto inner = trace.scope("conv1", "compute"); }
    }
    {
      auto bwd = trace.scope("backward", "compute");
      spin_for(0.0003);
      bwd.end();  // explicit end; destruction then records nothing more
    }
    auto moved = trace.scope("optimizer", "compute");
    auto target = std::move(moved);  // one span, not two
  }
  const auto ev = spans(json::parse(trace.serialize()));
  REQUIRE(ev.size() == 5);
  const json& step = find_span(ev, "step");
  const json& fwd = find_span(ev, "forward");
  const json& bwd = find_span(ev, "backward");
  CHECK(within(fwd, step));
  CHECK(within(find_span(ev, "conv1"), fwd));
  CHECK(within(bwd, step));
  CHECK(within(find_span(ev, "optimizer"), step));
  CHECK(bwd.at("ts").get<double>() >= fwd.at("ts").get<double>() + fwd.at("dur").get<double>());
  CHECK(step.at("args").at("step") == 7);
}

TEST_CASE("several threads record at once") {
  TraceWriter trace(1);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&trace, t] {
      for (int i = 0; i < 500; ++i) {
        auto s =
            trace.scope("bucket " + std::to_string(i), t % 2 ? "comm" : "compute", {{"thread", t}});
      }
    });
  for (auto& th : threads) th.join();
  CHECK(trace.event_count() == 2000);
  CHECK(spans(json::parse(trace.serialize())).size() == 2000);
}

TEST_CASE("a disabled writer and a full writer drop spans") {
  TraceWriter off(0, false);
  { auto s = off.scope("x", "compute"); }
  off.span("y", "compute", 1, 2);
  CHECK(off.event_count() == 0);
  CHECK(spans(json::parse(off.serialize())).empty());

  TraceWriter small(0, true, 5);
  for (int i = 0; i < 12; ++i) small.span("s", "compute", 1, 2);
  CHECK(small.event_count() == 5);
  CHECK(small.dropped_count() == 7);
  CHECK(json::parse(small.serialize()).at("otherData").at("dropped_events") == 7);
}

TEST_CASE("ranks merge onto one time axis") {
  // Writers created 30 ms apart have different origins; a span recorded at one
  // monotonic instant must land at the same merged ts for both.
  TraceWriter r0(0);
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  TraceWriter r1(1);
  const double t = monotonic_seconds();
  r0.span("same instant", "comm", t, t + 0.001);
  r1.span("same instant", "comm", t, t + 0.001);
  {
    auto a = r1.scope("outer", "compute");
    { auto b = r1.scope("inner", "compute"); }
  }

  const json merged = json::parse(merge_traces({r1.serialize(), r0.serialize()}));
  CHECK(merged.at("otherData").at("ringtrain_ranks") == 2);
  const auto ev = spans(merged);
  REQUIRE(ev.size() == 4);
  const double ts0 = find_span(ev, "same instant", 0).at("ts");
  const double ts1 = find_span(ev, "same instant", 1).at("ts");
  CHECK(std::abs(ts0 - ts1) < 1000.0);  // within 1 ms: clock sampling jitter only
  CHECK(ts1 > 29000.0);  // rank 0 started 30 ms earlier: its origin is the axis start
  CHECK(within(find_span(ev, "inner"), find_span(ev, "outer")));

  CHECK_THROWS_AS(merge_traces({"not json"}), Error);
  CHECK_THROWS_AS(merge_traces({R"({"traceEvents": []})"}), Error);
  CHECK(spans(json::parse(merge_traces({}))).empty());
}

TEST_CASE("per-rank files merge into one file") {
  TempDir dir("trace-files");
  const std::string path = (dir.path / "out" / "trace.json").string();
  for (int r = 0; r < 3; ++r) {
    TraceWriter w(r);
    for (int i = 0; i <= r; ++i) {
      auto s = w.scope("step " + std::to_string(i), "compute");
    }
    w.write_rank_file(path);
    CHECK(fs::exists(TraceWriter::rank_file_path(path, r)));
  }
  CHECK(TraceWriter::rank_file_path(path, 2) == path + ".rank-2.json");
  merge_trace_files(path, 3);
  std::ifstream in(path);
  const json merged = json::parse(in);
  const auto ev = spans(merged);
  CHECK(ev.size() == 1 + 2 + 3);
  std::set<int> pids;
  for (const auto& e : ev) pids.insert(e.at("pid").get<int>());
  CHECK(pids == std::set<int>{0, 1, 2});
  for (int r = 0; r < 3; ++r) CHECK_FALSE(fs::exists(TraceWriter::rank_file_path(path, r)));

  // A rank file that is missing is named.
  CHECK_THROWS_WITH(merge_trace_files(path, 2), Catch::Contains(path + ".rank-0.json"));
}
