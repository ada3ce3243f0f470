#include "ringtrain/comm/flight_verdict.h"

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <regex>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "ringtrain/comm/flight_recorder.h"
#include "ringtrain/core/check.h"

namespace ringtrain {

namespace {

FlightState parse_state(const std::string& path) {
  std::ifstream in(path);
  RT_CHECK(in.good(), "flight record {}: cannot open it", path);
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(in);
    RT_CHECK(j.value("format", "") == "ringtrain-flight-1", "flight record {}: unknown format",
             path);
    FlightState s;
    s.job = j.value("job", "");
    s.rank = j.at("rank").get<int>();
    s.world_size = j.at("world_size").get<int>();
    s.host = j.at("host").get<std::string>();
    s.device = j.at("device").get<std::string>();
    s.pid = j.at("pid").get<long>();
    s.phase = j.at("phase").get<std::string>();
    s.phase_since = j.at("phase_since").get<double>();
    s.step = j.at("step").get<std::uint64_t>();
    for (const auto& [channel, seq] : j.at("issued").items())
      s.issued[channel] = seq.get<std::uint64_t>();
    s.written = j.at("written").get<double>();
    s.period = j.at("period").get<double>();
    s.final_record = j.at("final").get<bool>();
    s.reason = j.at("reason").get<std::string>();
    for (const auto& r : j.at("records")) {
      FlightCollective c;
      c.channel = r.at("channel").get<std::string>();
      c.backend = r.at("backend").get<std::string>();
      c.op = r.at("op").get<std::string>();
      c.seq = r.at("seq").get<std::uint64_t>();
      c.step = r.at("step").get<std::uint64_t>();
      c.bucket = r.at("bucket").get<std::int64_t>();
      c.bytes = r.at("bytes").get<std::uint64_t>();
      c.issued = r.at("issued").get<double>();
      c.started = r.at("started").get<double>();
      c.completed = r.at("completed").get<double>();
      s.records.push_back(std::move(c));
    }
    return s;
  } catch (const nlohmann::json::exception& e) {
    RT_CHECK(false, "flight record {}: not a valid record ({})", path, e.what());
  }
  return {};
}

// The live page (flight_recorder.h) is newer than the snapshot whenever the
// rank changed phase or issued since: take its phase, step and issue counts.
void merge_live(FlightState& s, const std::filesystem::path& path) {
  auto read = [&path](flight::LiveFlightState& out) {
    std::ifstream in(path, std::ios::binary);
    return in.read(reinterpret_cast<char*>(&out), sizeof(out)) && in.gcount() == sizeof(out);
  };
  flight::LiveFlightState a, b;
  for (int attempt = 0; attempt < 10; ++attempt) {
    if (!read(a) || !read(b)) return;
    if (std::memcmp(a.magic, "RTFLIVE1", 8) != 0) return;
    const std::uint64_t va = a.version.load(), vb = b.version.load();
    if (va != vb || va % 2 != 0) continue;
    if (a.phase_since < s.phase_since) return;  // the snapshot is as new
    s.phase.assign(a.phase, strnlen(a.phase, sizeof(a.phase)));
    s.phase_since = a.phase_since;
    s.step = a.step;
    for (const auto& entry : a.issued) {
      const std::string channel(entry.channel, strnlen(entry.channel, sizeof(entry.channel)));
      if (!channel.empty()) s.issued[channel] = std::max(s.issued[channel], entry.seq);
    }
    return;
  }
}

std::string this_host() {
  char name[256] = {};
  ::gethostname(name, sizeof(name) - 1);
  return name;
}

// 'R', 'S', 'T' (stopped), ... of a process on this host; nullopt: no such process.
std::optional<char> process_state(long pid) {
  std::ifstream stat(fmt::format("/proc/{}/stat", pid));
  if (!stat) return std::nullopt;
  std::string line;
  std::getline(stat, line);
  const auto close = line.rfind(')');
  if (close == std::string::npos || close + 2 >= line.size()) return std::nullopt;
  return line[close + 2];
}

std::string op_name(const std::string& op) {
  if (op == "allreduce") return "all-reduce";
  if (op == "allgather") return "all-gather";
  if (op == "reduce_scatter") return "reduce-scatter";
  return op;
}

std::string describe_op(const FlightCollective& c) {
  std::string where;
  if (c.bucket >= 0)
    where = fmt::format(" (bucket {} of step {})", c.bucket, c.step);
  else if (c.step > 0)
    where = fmt::format(" (step {})", c.step);
  return fmt::format("{} #{}{} on the {} channel ({})", op_name(c.op), c.seq, where, c.channel,
                     c.backend);
}

// (channel, seq) of every collective that some rank's record shows
// completed and that completes nowhere before every rank has joined it (a
// broadcast's root may finish before the others arrive).
using CollectiveId = std::pair<std::string, std::uint64_t>;
std::set<CollectiveId> joined_by_all(const std::vector<FlightState>& ranks) {
  std::set<CollectiveId> done;
  for (const auto& s : ranks)
    for (const FlightCollective& c : s.records)
      if (c.completed != 0 && c.op != "broadcast") done.insert({c.channel, c.seq});
  return done;
}

// The collective a rank waits in. One that every rank has joined is not a
// wait but a lag: this rank's record was written before it saw the last of
// the data, as when the first rank to stop reads the others' records while
// they are still finishing the same collective.
const FlightCollective* pending(const FlightState& s, const std::set<CollectiveId>& done) {
  for (const FlightCollective& c : s.records)
    if (c.completed == 0) return done.count({c.channel, c.seq}) ? nullptr : &c;
  return nullptr;
}

bool silent(const FlightState& s, double now_s) {
  return now_s - s.written > 3 * s.period + 1;
}

std::string describe_rank(const FlightState& s, double now_s, bool live) {
  const std::string who = fmt::format("rank {} (host {}, {})", s.rank, s.host, s.device);
  const std::string where = fmt::format("phase '{}' of step {}", s.phase, s.step);
  const double in_phase = std::max(0.0, now_s - s.phase_since);
  const double quiet = now_s - s.written;
  // On this host the process itself says whether it is gone or stopped.
  if (live && s.host == this_host()) {
    const auto state = process_state(s.pid);
    if (!state || *state == 'Z' || *state == 'X')
      return fmt::format("{} was lost (its process {} is gone) in {}, entered {:.0f} s ago", who,
                         s.pid, where, in_phase);
    if (*state == 'T' || *state == 't')
      return fmt::format("{} is stopped (SIGSTOP, process {}) in {}, for {:.0f} s", who, s.pid,
                         where, in_phase);
  }
  if (!silent(s, now_s)) return fmt::format("{} has been in {} for {:.0f} s", who, where, in_phase);
  return fmt::format("{} has been silent for {:.0f} s (stopped or lost); it was last in {}", who,
                     quiet, where);
}

std::string rank_word(const std::vector<int>& ranks) {
  return fmt::format("rank{} {}", ranks.size() > 1 ? "s" : "", format_rank_list(ranks));
}

}  // namespace

std::string format_rank_list(const std::vector<int>& ranks) {
  std::string out;
  for (std::size_t i = 0; i < ranks.size();) {
    std::size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    if (!out.empty()) out += ',';
    out += j == i ? fmt::format("{}", ranks[i]) : fmt::format("{}-{}", ranks[i], ranks[j]);
    i = j + 1;
  }
  return out;
}

std::vector<FlightState> read_flight_dir(const std::string& dir) {
  std::error_code ec;
  RT_CHECK(std::filesystem::is_directory(dir, ec), "flight records: {} is not a directory", dir);
  std::vector<FlightState> out;
  const std::regex name(R"(rank-[0-9]+\.json)");
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec))
    if (std::regex_match(entry.path().filename().string(), name)) {
      out.push_back(parse_state(entry.path().string()));
      merge_live(out.back(),
                 std::filesystem::path(dir) / fmt::format("rank-{}.live", out.back().rank));
    }
  RT_CHECK(!out.empty(), "flight records: {} holds no rank-<r>.json", dir);
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.rank < b.rank; });
  return out;
}

FlightJob select_job(std::vector<FlightState> all, const std::string& job) {
  FlightJob out;
  out.job = job;
  if (out.job.empty() && !all.empty())
    out.job = std::max_element(all.begin(), all.end(), [](const auto& a, const auto& b) {
                return a.written < b.written;
              })->job;
  for (FlightState& s : all) (s.job == out.job ? out.ranks : out.stale).push_back(std::move(s));
  return out;
}

std::string flight_verdict(const std::vector<FlightState>& ranks, double now_s, bool live) {
  if (ranks.empty()) return "no flight records";
  // Ranks without a file (never started, or their directory is elsewhere).
  std::vector<int> absent;
  std::set<int> present;
  for (const auto& s : ranks) present.insert(s.rank);
  for (int r = 0; r < ranks.front().world_size; ++r)
    if (!present.count(r)) absent.push_back(r);
  const std::string absent_note =
      absent.empty() ? "" : fmt::format("; {} left no record", rank_word(absent));

  // The collective most ranks are waiting in (ties: the earliest).
  std::map<CollectiveId, std::vector<int>> waiting_in;
  std::map<CollectiveId, const FlightCollective*> op_of;
  const std::set<CollectiveId> done = joined_by_all(ranks);
  for (const auto& s : ranks)
    if (const FlightCollective* c = pending(s, done)) {
      waiting_in[{c->channel, c->seq}].push_back(s.rank);
      op_of[{c->channel, c->seq}] = c;
    }
  if (waiting_in.empty()) {
    for (const auto& s : ranks)
      if (s.final_record && !s.reason.empty())
        return fmt::format("no rank is waiting in a collective; rank {} ended with: {}{}", s.rank,
                           s.reason, absent_note);
    return fmt::format("no rank is waiting in a collective{}", absent_note);
  }
  auto blocked = waiting_in.begin();
  for (auto it = waiting_in.begin(); it != waiting_in.end(); ++it)
    if (it->second.size() > blocked->second.size()) blocked = it;
  const auto& [channel, seq] = blocked->first;
  const std::vector<int>& waiting = blocked->second;
  const std::string op = describe_op(*op_of[blocked->first]);

  std::vector<const FlightState*> never_issued, not_waiting, quiet;
  for (const auto& s : ranks) {
    const auto it = s.issued.find(channel);
    if (it == s.issued.end() || it->second < seq) never_issued.push_back(&s);
    if (std::find(waiting.begin(), waiting.end(), s.rank) == waiting.end())
      not_waiting.push_back(&s);
    if (silent(s, now_s)) quiet.push_back(&s);
  }
  std::vector<const FlightState*> culprits = never_issued;
  std::string relation = "never issued";
  if (culprits.empty()) {
    culprits = not_waiting.empty() ? quiet : not_waiting;
    relation = "issued but did not complete";
  }
  // A rank whose process is gone or stopped is the cause: the ranks of other
  // nodes that wait with it only look stuck (their records lag by a snapshot).
  std::vector<const FlightState*> halted;
  for (const auto& s : ranks)
    if (live && s.host == this_host()) {
      const auto state = process_state(s.pid);
      if (!state || *state == 'Z' || *state == 'X' || *state == 'T' || *state == 't')
        halted.push_back(&s);
    }
  if (!halted.empty()) {
    const bool all_never_issued = std::all_of(halted.begin(), halted.end(), [&](const auto* h) {
      return std::find(never_issued.begin(), never_issued.end(), h) != never_issued.end();
    });
    culprits = halted;
    relation = all_never_issued ? "never issued" : "issued but did not complete";
  }
  // The ranks named as the cause are not also listed as waiting.
  std::vector<int> waiters;
  for (int r : waiting)
    if (std::none_of(culprits.begin(), culprits.end(), [r](const auto* c) { return c->rank == r; }))
      waiters.push_back(r);
  if (waiters.empty()) waiters = waiting;
  const std::string wait_part =
      fmt::format("{} {} waiting in {}", rank_word(waiters), waiters.size() > 1 ? "are" : "is", op);
  if (culprits.empty())
    return fmt::format(
        "every rank is waiting in {}: a peer stopped making progress inside it (the network, or "
        "a backend bug){}",
        op, absent_note);
  std::vector<std::string> parts;
  std::vector<int> culprit_ranks;
  for (const FlightState* s : culprits) {
    parts.push_back(describe_rank(*s, now_s, live));
    culprit_ranks.push_back(s->rank);
  }
  return fmt::format("{}; {}, which {} {}{}", fmt::join(parts, "; "), wait_part,
                     rank_word(culprit_ranks), relation, absent_note);
}

std::string flight_table(const std::vector<FlightState>& ranks, double now_s,
                         std::size_t last_records) {
  std::string out =
      fmt::format("{:>4}  {:<12} {:>8}  {:<16} {:>6} {:>9} {:>8}  {}\n", "rank", "host", "pid",
                  "phase", "step", "in phase", "silent", "last collectives (newest last)");
  for (const auto& s : ranks) {
    std::vector<std::string> last;
    const std::size_t n = s.records.size();
    for (std::size_t i = n > last_records ? n - last_records : 0; i < n; ++i) {
      const FlightCollective& c = s.records[i];
      const std::string state = c.completed > 0
                                    ? fmt::format("{:.1f}ms", (c.completed - c.issued) * 1e3)
                                : c.started > 0 ? "running"
                                                : "queued";
      last.push_back(fmt::format("{} {}#{}{} {}", c.channel, c.op, c.seq,
                                 c.bucket >= 0 ? fmt::format(" b{}", c.bucket) : "", state));
    }
    out += fmt::format("{:>4}  {:<12} {:>8}  {:<16} {:>6} {:>8.1f}s {:>7.1f}s  {}{}\n", s.rank,
                       s.host, s.pid, s.phase, s.step, std::max(0.0, now_s - s.phase_since),
                       std::max(0.0, now_s - s.written), fmt::join(last, ", "),
                       s.final_record ? "  [ended: " + s.reason + "]" : "");
  }
  return out;
}

}  // namespace ringtrain
