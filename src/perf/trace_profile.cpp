// See trace_profile.h: step phases and bucket launches, per step, from a trace.
#include "ringtrain/perf/trace_profile.h"

#include <algorithm>
#include <fstream>
#include <map>
#include <vector>

#include <fmt/format.h>

#include "core/median.h"
#include "ringtrain/core/check.h"
#include "ringtrain/core/error.h"

namespace ringtrain {
namespace {

struct Span {
  std::string name;
  double start_s = 0, end_s = 0;
  double bytes = -1;
};

struct StepSpans {
  double first_start_s = 0;
  double backward_start_s = -1, backward_end_s = -1;
  double optimizer_start_s = -1, optimizer_s = 0;
  double other_backward_s = 0;  // earlier micro-batches' backward (--accum)
  std::vector<BucketProfile> buckets;
  bool has_first = false;
};

}  // namespace

TraceProfile profile_from_trace(const nlohmann::json& trace, int rank, std::size_t warmup_steps) {
  RT_CHECK(trace.is_object() && trace.contains("traceEvents") && trace["traceEvents"].is_array(),
           "trace: not a Chrome trace document (no traceEvents list)");
  std::vector<Span> spans;
  std::map<int, bool> ranks;
  for (const nlohmann::json& ev : trace["traceEvents"]) {
    if (!ev.contains("pid") || !ev.contains("ph")) continue;
    ranks[ev["pid"].get<int>()] = true;
    if (ev["pid"].get<int>() != rank) continue;
    const std::string ph = ev["ph"].get<std::string>();
    if (ph != "X") continue;
    Span s;
    s.name = ev.value("name", "");
    s.start_s = ev["ts"].get<double>() * 1e-6;
    s.end_s = s.start_s + ev["dur"].get<double>() * 1e-6;
    if (ev.contains("args") && ev["args"].contains("bytes"))
      s.bytes = ev["args"]["bytes"].get<double>();
    spans.push_back(std::move(s));
  }
  RT_CHECK(ranks.count(rank) == 1, "trace: no events of rank {} ({} rank(s) in the trace)", rank,
           ranks.size());
  std::sort(spans.begin(), spans.end(),
            [](const Span& a, const Span& b) { return a.start_s < b.start_s; });

  // A step ends with its optimizer span; everything before it since the
  // previous optimizer belongs to it.
  std::vector<StepSpans> steps(1);
  for (const Span& s : spans) {
    StepSpans& st = steps.back();
    if (!st.has_first && s.name != "optimizer") {
      st.first_start_s = s.start_s;
      st.has_first = true;
    }
    if (s.name == "backward") {
      if (st.backward_start_s >= 0) st.other_backward_s += st.backward_end_s - st.backward_start_s;
      st.backward_start_s = s.start_s;
      st.backward_end_s = s.end_s;
    } else if (s.name.rfind("bucket ", 0) == 0 && s.name.ends_with(" ready")) {
      RT_CHECK(s.bytes >= 0, "trace: '{}' has no bucket size (args.bytes); record the trace again",
               s.name);
      st.buckets.push_back({s.bytes, s.start_s});
    } else if (s.name == "optimizer") {
      st.optimizer_start_s = s.start_s;
      st.optimizer_s = s.end_s - s.start_s;
      steps.emplace_back();
    }
  }
  steps.pop_back();  // the open one after the last optimizer
  // Step i's period runs to step i+1's first span, so the last step has none.
  RT_CHECK(steps.size() >= warmup_steps + 2,
           "trace: {} step(s) of rank {}; the profile needs at least {} (warm-up {} + 1 measured "
           "+ 1 to close its period)",
           steps.size(), rank, warmup_steps + 2, warmup_steps);
  std::vector<double> before, backward, optimizer;
  std::vector<std::vector<double>> ready, bytes;
  TraceProfile out;
  for (std::size_t i = warmup_steps; i + 1 < steps.size(); ++i) {
    const StepSpans& st = steps[i];
    RT_CHECK(st.backward_start_s >= 0 && st.optimizer_start_s >= 0 && st.has_first,
             "trace: step {} of rank {} lacks a backward or optimizer span", i, rank);
    const double period = steps[i + 1].first_start_s - st.first_start_s;
    const double bwd = st.backward_end_s - st.backward_start_s;
    const double wait = std::max(0.0, st.optimizer_start_s - st.backward_end_s);
    before.push_back(std::max(0.0, period - bwd - wait - st.optimizer_s));
    backward.push_back(bwd);
    optimizer.push_back(st.optimizer_s);
    if (ready.empty()) {
      ready.resize(st.buckets.size());
      bytes.resize(st.buckets.size());
    }
    RT_CHECK(st.buckets.size() == ready.size(),
             "trace: step {} of rank {} has {} bucket(s), step {} had {}", i, rank,
             st.buckets.size(), warmup_steps, ready.size());
    for (std::size_t k = 0; k < st.buckets.size(); ++k) {
      // Without overlap, buckets launch after backward: their ready time is
      // then at most backward's end, which is what the predictor should assume.
      ready[k].push_back(std::clamp(st.buckets[k].ready_s - st.backward_start_s, 0.0, bwd));
      bytes[k].push_back(st.buckets[k].bytes);
    }
    ++out.steps_used;
  }
  out.profile.before_backward_s = median(before);
  out.profile.backward_s = median(backward);
  out.profile.optimizer_s = median(optimizer);
  for (std::size_t k = 0; k < ready.size(); ++k)
    out.profile.buckets.push_back({median(bytes[k]), median(ready[k])});
  out.ranks = static_cast<int>(ranks.size());
  return out;
}

TraceProfile profile_from_trace_file(const std::string& path, int rank, std::size_t warmup_steps) {
  std::ifstream f(path);
  RT_CHECK(f.good(), "trace {}: cannot open the file", path);
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(f);
  } catch (const nlohmann::json::exception& e) {
    throw Error(fmt::format("trace {}: not JSON: {}", path, e.what()));
  }
  try {
    return profile_from_trace(doc, rank, warmup_steps);
  } catch (const Error& e) {
    throw Error(fmt::format("{}: {}", path, e.what()));
  }
}

}  // namespace ringtrain
